// A session's configuration options (mode, model, ...: `configOptions` from session/load and
// `config_option_update`) as labelled selects; a change is sent as session/set_config_option.

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

export class Options {
  constructor(rpc, sessionId) {
    this.rpc = rpc;
    this.sessionId = sessionId;
    this.root = el("div", undefined, "options-bar");
    this.onError = () => {};
  }

  show(configOptions) {
    const parts = (configOptions || []).filter((o) => o.type === "select").map((o) => this.select(o));
    this.root.replaceChildren(...parts);
  }

  select(option) {
    const label = el("label", undefined, "config");
    label.append(el("span", option.name));
    const select = label.appendChild(el("select"));
    select.dataset.configId = option.id;
    if (option.description) label.title = option.description;
    for (const item of option.options || []) {
      if (Array.isArray(item.options)) {
        const group = select.appendChild(el("optgroup"));
        group.label = item.name;
        for (const choice of item.options) group.append(this.choice(choice, option.currentValue));
      } else {
        select.append(this.choice(item, option.currentValue));
      }
    }
    select.addEventListener("change", () => this.change(option.id, select.value));
    return label;
  }

  choice(item, current) {
    const node = el("option", item.name);
    node.value = item.value;
    node.selected = item.value === current;
    return node;
  }

  async change(configId, value) {
    try {
      const result = await this.rpc.call("session/set_config_option", { sessionId: this.sessionId, configId, value });
      this.show(result.configOptions);
    } catch (error) {
      this.onError(error);
    }
  }
}
