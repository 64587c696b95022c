// A JSON-RPC 2.0 client over the runner's /acp WebSocket: requests with promises, notifications,
// and requests from the runner (permission questions) answered by a handler. The token travels
// as the `acp.bearer.<token>` subprotocol, never in the URL (docs/runner.md, "Remote clients").

export class RpcError extends Error {
  constructor(error) {
    super(error.message);
    this.code = error.code;
    this.data = error.data;
  }
}

export class Rpc {
  constructor(url, token) {
    this.url = url;
    this.token = token;
    this.nextId = 1;
    this.pending = new Map();
    this.onNotification = () => {};
    this.onRequest = async () => { throw new RpcError({ code: -32601, message: "Method not found" }); };
    this.onClose = () => {};
  }

  open() {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.url, ["acp", "acp.bearer." + this.token]);
      this.socket = socket;
      socket.onopen = () => resolve();
      socket.onerror = () => reject(new Error("could not connect to " + this.url));
      socket.onclose = () => {
        for (const { reject: fail } of this.pending.values()) fail(new Error("connection closed"));
        this.pending.clear();
        this.onClose();
      };
      socket.onmessage = (event) => this.receive(event.data);
    });
  }

  send(message) {
    this.socket.send(JSON.stringify({ jsonrpc: "2.0", ...message }));
  }

  call(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ id, method, params });
    });
  }

  notify(method, params) {
    this.send({ method, params });
  }

  receive(text) {
    let message;
    try { message = JSON.parse(text); } catch { return; }
    if (message.method === undefined) {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.error) waiting.reject(new RpcError(message.error));
      else waiting.resolve(message.result);
    } else if (message.id === undefined) {
      this.onNotification(message.method, message.params || {});
    } else {
      this.answer(message);
    }
  }

  async answer(message) {
    try {
      const result = await this.onRequest(message.method, message.params || {}, message.id);
      this.send({ id: message.id, result });
    } catch (error) {
      const code = typeof error.code === "number" ? error.code : -32603;
      this.send({ id: message.id, error: { code, message: String(error.message || error) } });
    }
  }
}
