"""Your own agent: one class with one method. From the repository root, serve it with
`acp-server --agent examples.my_agent:make_agent`. It streams a reply, then offers to save the
prompt in hello.txt and writes the file only when the user allows it.
"""

from adapters.base import Sink, TurnInput
from adapters.callable import SimpleAdapter
from adapters.events import StopReason


class MyAgent(SimpleAdapter):
    name = "my-agent"

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        for word in f"You said: {turn.text}".split():
            sink.text(word + " ")
        call = sink.tool_call("Save the prompt in hello.txt", kind="edit", raw_input={"path": "hello.txt"})
        if sink.request_permission(call).allowed:
            sink.write_text_file("hello.txt", turn.text + "\n")
            sink.tool_update(call, status="completed")
        else:
            sink.tool_update(call, status="failed")
        return "end_turn"


def make_agent() -> MyAgent:
    return MyAgent()
