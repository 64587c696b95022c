"""The one path opener: local reads, writes, listings and searches stay inside the session's
directories however the path is spelled, symlinked, or swapped while it is opened.

Real files in a temporary directory; the swaps are real `renameat2(RENAME_EXCHANGE)` calls (or
rename pairs where libc lacks it) from a thread racing the opens. Each case runs with the
kernel's `openat2` and with the `O_NOFOLLOW` walk used where it is missing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from harness import running

from acp_server.acp.handlers import AcpAgent
from adapters import paths
from adapters.base import ToolRefused
from adapters.openai.search import list_directory, search_text
from adapters.paths import Target, read_text, target, write_text
from adapters.scripted import ScriptedAdapter

SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SWAPS_PER_CASE = 320
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


@pytest.fixture(params=["openat2", "walk"])
def opener(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the kernel's openat2 (where it has it) and with the fallback walk."""
    if request.param == "walk":
        monkeypatch.setattr(paths, "_openat2", lambda: None)
    elif paths._openat2() is None:
        pytest.skip("this kernel has no openat2")
    return request.param


@dataclass(frozen=True)
class Tree:
    work: Path  # the session's cwd
    outside: Path  # a directory next to it, holding the secret


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "credentials").write_text(SECRET + "\n")
    return Tree(work, outside)


# --- symlinks that stay inside, and ones that lead out ------------------------------------


def test_a_symlinked_file_leading_out_is_not_searched_and_is_listed_as_leading_out(tree: Tree, opener: str) -> None:
    (tree.work / "notes.txt").symlink_to("../outside/credentials")
    (tree.work / "readme.md").write_text("hello\n")
    (tree.work / "alias.md").symlink_to("readme.md")
    (tree.work / "secrets").symlink_to(tree.outside)

    found = search_text(str(tree.work), ".")

    assert found.text == "alias.md:1: hello\nreadme.md:1: hello"
    assert search_text(str(tree.work), ".", "alias.md").text == "readme.md:1: hello"
    assert list_directory(str(tree.work)).splitlines() == [
        "alias.md",
        "notes.txt (a symlink to outside the workspace)",
        "readme.md",
        "secrets (a symlink to outside the workspace)",
    ]
    for path in ("notes.txt", "secrets/credentials"):
        with pytest.raises(ToolRefused, match="outside the session's workspace"):
            search_text(str(tree.work), ".", path)
        with pytest.raises(ToolRefused, match="outside the session's workspace"):
            read_text(path, cwd=str(tree.work))
        with pytest.raises(ToolRefused, match="outside the session's workspace"):
            write_text(path, "pwned", cwd=str(tree.work))
    assert (tree.outside / "credentials").read_text() == SECRET + "\n"


def test_a_gitignore_leading_out_is_not_read_and_ignored_files_stay_ignored(tree: Tree, opener: str) -> None:
    (tree.outside / "ignore").write_text("*\n")
    (tree.work / "src").mkdir()
    (tree.work / "src" / ".gitignore").symlink_to(tree.outside / "ignore")
    (tree.work / "src" / "main.py").write_text("needle\n")
    (tree.work / ".gitignore").write_text("*.log\n")
    (tree.work / "src" / "debug.log").write_text("needle\n")

    assert search_text(str(tree.work), "needle").text == "src/main.py:1: needle"
    assert search_text(str(tree.work), "needle", "src").text == "src/main.py:1: needle"


def test_the_search_skips_a_named_pipe_rather_than_waiting_for_a_writer_forever(tree: Tree, opener: str) -> None:
    os.mkfifo(tree.work / "events.pipe")
    (tree.work / "app.py").write_text("needle\n")

    assert search_text(str(tree.work), "needle").text == "app.py:1: needle"
    assert search_text(str(tree.work), "needle", "events.pipe").text == "No matches."


def test_a_symlink_inside_the_workspace_is_followed_for_reads_and_writes_and_stays(tree: Tree, opener: str) -> None:
    (tree.work / "real").mkdir()
    (tree.work / "real" / "script.sh").write_text("old")
    (tree.work / "real" / "script.sh").chmod(0o750)
    (tree.work / "dir").symlink_to(tree.work / "real")  # absolute, yet inside
    (tree.work / "link.sh").symlink_to("dir/script.sh")

    assert read_text("link.sh", cwd=str(tree.work)) == "old"
    write_text("link.sh", "new", cwd=str(tree.work))
    write_text("dir/made/deep/file.txt", "created", cwd=str(tree.work))

    assert (tree.work / "link.sh").is_symlink()
    assert (tree.work / "real" / "script.sh").read_text() == "new"
    assert (tree.work / "real" / "script.sh").stat().st_mode & 0o777 == 0o750
    assert (tree.work / "real" / "made" / "deep" / "file.txt").read_text() == "created"
    assert sorted(p.name for p in (tree.work / "real").iterdir()) == ["made", "script.sh"]  # no temporary left


def test_a_path_is_taken_as_its_real_location_under_the_root_as_the_session_names_it(
    tree: Tree, tmp_path: Path
) -> None:
    deep = tree.work / "node_modules" / ".pnpm" / "pad@1" / "node_modules" / "pad"
    deep.mkdir(parents=True)
    (tree.work / "node_modules" / "pad").symlink_to(".pnpm/pad@1/node_modules/pad")
    (tmp_path / "named").symlink_to(tree.work)  # the cwd as an editor may name it
    extra = tmp_path / "extra"
    extra.mkdir()
    cwd, roots = str(tmp_path / "named"), (str(tmp_path / "named"), str(extra))

    found = target("node_modules/pad/../../../outside/credentials", cwd=cwd, roots=roots)
    assert found == Target(f"{cwd}/node_modules/.pnpm/outside/credentials", "node_modules/.pnpm/outside/credentials")
    assert target(found.path, cwd=cwd, roots=roots) == found  # what is asked for resolves to itself
    assert (
        target("node_modules/pad/index.js", cwd=cwd, roots=roots).shown
        == "node_modules/.pnpm/pad@1/node_modules/pad/index.js"
    )
    assert target(".", cwd=cwd, roots=roots) == Target(cwd, ".")
    assert target(str(extra / "a.txt"), cwd=cwd, roots=roots) == Target(str(extra / "a.txt"), str(extra / "a.txt"))
    for path in ("../outside/credentials", "node_modules/pad/../../../../../../outside/credentials", str(tree.outside)):
        with pytest.raises(ToolRefused, match="outside the session's workspace"):
            target(path, cwd=cwd, roots=roots)


def test_absolute_paths_are_taken_in_any_root_and_refused_elsewhere(tree: Tree, tmp_path: Path, opener: str) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (tree.work / "lib").symlink_to(extra)  # into another root: inside the session's directories
    roots = (str(tree.work), str(extra))

    write_text(str(extra / "a.txt"), "in extra", cwd=str(tree.work), roots=roots)

    assert read_text("lib/a.txt", cwd=str(tree.work), roots=roots) == "in extra"
    with pytest.raises(ToolRefused, match="outside the session's workspace"):
        read_text("lib/a.txt", cwd=str(tree.work))
    with pytest.raises(ToolRefused, match="outside the session's workspace"):
        write_text(str(tree.outside / "credentials"), "pwned", cwd=str(tree.work), roots=roots)
    assert (tree.outside / "credentials").read_text() == SECRET + "\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("bad\0name", "'bad\\x00name' is not a valid path"),
        ("loop", "Cannot read loop: Too many levels of symbolic links"),
        ("fifo", "Cannot read fifo: it is not a regular file"),
        ("file.txt/below", "Cannot read file.txt/below: Not a directory"),
        (".", ". is a directory"),
    ],
)
def test_a_path_that_cannot_be_read_is_a_tool_failure_with_the_reason(
    tree: Tree, opener: str, path: str, message: str
) -> None:
    (tree.work / "loop").symlink_to("loop")
    os.mkfifo(tree.work / "fifo")  # a read that blocked on it would hang the turn
    (tree.work / "file.txt").write_text("x")

    with pytest.raises(ToolRefused) as refused:
        read_text(path, cwd=str(tree.work))

    assert message in str(refused.value)
    if "\0" in path:
        with pytest.raises(ToolRefused, match="not a valid path"):
            write_text(path, "x", cwd=str(tree.work))
        with pytest.raises(ToolRefused, match="not a valid path"):
            target(path, cwd=str(tree.work))


async def test_the_openai_agent_never_sends_a_secret_behind_a_symlink_to_the_model(tree: Tree) -> None:
    pytest.importorskip("httpx", reason="the openai extra is not installed")
    from adapters.openai import OpenAIAdapter

    (tree.work / "notes.txt").symlink_to("../outside/credentials")
    (tree.work / "todo.txt").write_text("write tests\n")
    calls = [("search_text", {"pattern": "."}), ("list_directory", {}), ("read_file", {"path": "notes.txt"})]
    with FakeOpenAI(models=["gpt-4o"]) as fake:
        fake.script(reply(tools=calls), reply("Nothing secret here."))
        env = {"XDG_CONFIG_HOME": str(tree.work.parent / "config")}
        adapter = OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-test-0123456789abcd")
        try:
            async with running(AcpAgent(adapter)) as editor:
                await editor.initialize()
                sid = await editor.new_session(tree.work)
                assert await editor.prompt(sid, "what is in my notes?") == {"stopReason": "end_turn"}
        finally:
            adapter.close()
    assert all(SECRET not in request.raw.decode() for request in fake.requests)
    results = {m["tool_call_id"]: m["content"] for m in fake.chats[1]["messages"] if m["role"] == "tool"}
    assert results == {
        "call_0_search_text": "todo.txt:1: write tests",
        "call_1_list_directory": "notes.txt (a symlink to outside the workspace)\ntodo.txt",
        "call_2_read_file": f"Error: Refused: notes.txt is outside the session's workspace ({tree.work})",
    }


# --- a directory swapped for a symlink while it is opened -------------------------------


def _exchange() -> Callable[[bytes, bytes], object]:
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is not None:
        return lambda a, b: renameat2(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE)

    def renames(a: bytes, b: bytes) -> None:
        os.rename(a, a + b".x")
        os.rename(b, a)
        os.rename(a + b".x", b)

    return renames


@dataclass(frozen=True)
class Race(Tree):
    settle: Callable[[], None]  # stops the swaps (to look at the tree as it was left)


@pytest.fixture
def race(tree: Tree) -> Iterator[Race]:
    """`work/sub` (a directory with `data.txt`) and `work/swap` (a symlink to the outside
    directory) change places again and again until the test settles them or ends. A thread, not
    a process: its swaps then fall between our own system calls, where the GIL is let go."""
    (tree.work / "sub").mkdir()
    (tree.work / "sub" / "data.txt").write_text("inside\n")
    (tree.outside / "data.txt").write_text(SECRET + "\n")
    (tree.work / "swap").symlink_to(tree.outside)
    exchange, stop, swaps = _exchange(), threading.Event(), [0]
    sub, swap = os.fsencode(tree.work / "sub"), os.fsencode(tree.work / "swap")

    def swapper() -> None:
        while not stop.is_set():
            exchange(sub, swap)
            swaps[0] += 1

    def settle() -> None:
        stop.set()
        thread.join()

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        yield Race(tree.work, tree.outside, settle)
    finally:
        settle()
    assert swaps[0] > 0


def _outside_names(tree: Tree) -> list[str]:
    return sorted(os.listdir(tree.outside))


def _outcome(attempt: Callable[[], object], good: object, refusals: tuple[str, ...]) -> str:
    """How one call went: as it should, refused with a message of ours, or otherwise (wrong)."""
    try:
        return "as expected" if attempt() == good else "outside"
    except ToolRefused as exc:
        return "refused" if str(exc).startswith(refusals) else f"refused saying {exc}"
    except Exception as exc:  # anything else would kill the turn: count it
        return f"raised {type(exc).__name__}"


def test_reads_never_return_an_outside_file_while_a_directory_is_swapped_for_a_symlink(race: Race, opener: str) -> None:
    def read() -> str:
        return read_text("sub/data.txt", cwd=str(race.work))

    refusals = ("Refused: sub/data.txt is outside", "Cannot read sub/data.txt: ")
    outcomes = Counter(_outcome(read, "inside\n", refusals) for _ in range(SWAPS_PER_CASE))

    assert set(outcomes) <= {"as expected", "refused"}, outcomes


def test_writes_never_land_outside_nor_leave_temporary_files_while_a_directory_is_swapped(
    race: Race, opener: str
) -> None:
    def write(n: int) -> None:
        write_text(f"sub/new/{n}.txt", "written", cwd=str(race.work))

    refusals = ("Refused: sub/new/", "Cannot write sub/new/")
    outcomes = Counter(_outcome(functools.partial(write, n), None, refusals) for n in range(SWAPS_PER_CASE))
    race.settle()  # a walk of the tree while it changes would trip over the swaps

    assert _outside_names(race) == ["credentials", "data.txt"]
    assert (race.outside / "data.txt").read_text() == SECRET + "\n"
    assert set(outcomes) <= {"as expected", "refused"}, outcomes
    assert list(race.work.rglob("*.tmp")) == []


def test_searches_and_listings_never_show_an_outside_file_while_a_directory_is_swapped(race: Race, opener: str) -> None:
    for _ in range(SWAPS_PER_CASE // 4):
        for call in (lambda: search_text(str(race.work), "."), lambda: list_directory(str(race.work), "sub")):
            try:
                shown = call()
            except ToolRefused:
                continue
            assert SECRET not in str(shown) and "credentials" not in str(shown)


async def test_prompts_reading_and_writing_while_a_directory_is_swapped_end_and_stay_inside(race: Race) -> None:
    steps = []
    for n in range(10):
        steps.append({"tool": "Read", "kind": "read", "read_file": "sub/data.txt"})
        steps.append({"tool": "Write", "kind": "edit", "write_file": {"path": f"sub/w{n}.txt", "content": "x"}})
    agent = AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [*steps, {"say": "done"}]}]}))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(race.work)
        for _ in range(4):
            assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
            assert SECRET not in str(editor.frames)
        failed = [u["content"][0]["content"]["text"] for u in editor.updates[sid] if u.get("status") == "failed"]
        # named as given (refused by the agent) or as the place it was asked for (refused by the server)
        expected = tuple(
            f"{what} {where}sub/"
            for what in ("Refused:", "Cannot read", "Cannot write")
            for where in ("", f"{race.work}/")
        )
        assert [m for m in failed if not m.startswith(expected)] == []
    assert _outside_names(race) == ["credentials", "data.txt"]
