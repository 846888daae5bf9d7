"""The README and docs/*.md: every relative link resolves, every runnable code block runs (docs/development.md).

Conventions of the pages: a ```python block runs with the blocks before it on its page, in one namespace, in a
temporary folder; an HTML comment `<!-- setup: CODE -->` right before a block runs first (hidden set-up: files and
names the shown code uses; `needs("dot")` there skips the page without that program); a block right after
`<!-- not run: REASON -->` is reported as skipped with that reason. In ```bash blocks, `nnef-torch ...` lines are
parsed by the command line's own parser, and `python -m pytest -m EXPR` lines may name only registered markers.
"""
from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.M | re.S)
COMMENT = re.compile(r"<!--(.*?)-->", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    setup: str = ""        # hidden code from a `<!-- setup: ... -->` comment right before the block
    not_run: str = ""      # the reason of a `<!-- not run: ... -->` comment right before the block

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for fence in FENCE.finditer(text):
        before = text[:fence.start()].rstrip()
        setup = not_run = ""
        if before.endswith("-->"):
            comment = before[before.rfind("<!--") + 4:-3].strip()
            if comment.startswith("setup:"):
                setup = comment[len("setup:"):].strip("\n ")
            elif comment.startswith("not run:"):
                not_run = comment[len("not run:"):].strip()
        found.append(Block(page, text.count("\n", 0, fence.start()) + 2, fence.group(1), fence.group(2), setup,
                           not_run))
    return found


def prose(text: str) -> str:
    """The text without code blocks, inline code and HTML comments (where no link or heading is meant)."""
    text = FENCE.sub("", COMMENT.sub("", text))
    text = re.sub(r"^(?: {4}|\t).*$", "", text, flags=re.M)  # indented code
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (backticks too) dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", COMMENT.sub("", page.read_text(encoding="utf-8")))
    seen: dict[str, int] = {}
    result = set()
    for match in HEADING.finditer(text):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_relative_links_resolve(page):
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {file.name}")
    assert broken == [], f"{_page_id(page)}: broken links:\n" + "\n".join(broken)


def test_slugs_follow_github():
    assert slug("Dialects read: tract_core") == "dialects-read-tract_core"
    assert slug("Networks, passes and batch sizes: `graph_def`") == "networks-passes-and-batch-sizes-graph_def"
    assert slug("Set-up") == "set-up"


def _python_pages() -> list[Path]:
    return [page for page in PAGES if any(block.lang == "python" for block in blocks(page))]


@pytest.mark.parametrize("page", _python_pages(), ids=_page_id)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def needs(program: str) -> None:
        if shutil.which(program) is None:
            pytest.skip(f"{_page_id(page)}: its examples need `{program}` on the PATH")

    namespace = {"__name__": "__docs__", "needs": needs}
    try:
        for block in blocks(page):
            if block.lang != "python" or block.not_run:
                continue
            for code, what in ((block.setup, "set-up of the block"), (block.code, "block")):
                try:
                    exec(compile(code, f"{block.where}", "exec"), namespace)
                except pytest.skip.Exception:
                    raise
                except Exception as error:
                    raise AssertionError(f"the {what} at {block.where} fails: {type(error).__name__}: {error}") \
                        from error
    finally:
        torch.set_num_threads(threads)


NOT_RUN = [block for page in PAGES for block in blocks(page) if block.not_run]


@pytest.mark.parametrize("block", NOT_RUN, ids=[block.where for block in NOT_RUN])
def test_blocks_not_run_say_why(block):
    assert block.lang == "python", f"{block.where}: only python blocks are run, so only they can be marked 'not run'"
    pytest.skip(f"{block.where} is not run: {block.not_run}")


def _commands(block: Block) -> list[list[str]]:
    text = block.code.replace("\\\n", " ")
    return [argv for line in text.splitlines() if (argv := shlex.split(line, comments=True))]




BASH = [block for page in PAGES for block in blocks(page) if block.lang == "bash"]


@pytest.mark.parametrize("block", BASH, ids=[block.where for block in BASH])
def test_bash_commands_parse(block, pytestconfig):
    from nnef_torch.cli import build_parser

    markers = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    for argv in _commands(block):
        commands = [[]]
        for word in argv:
            commands.append([]) if word in ("&&", "||", ";") else commands[-1].append(word)
        for words in commands:
            if words[:1] == ["nnef-torch"]:
                try:
                    build_parser().parse_args(words[1:])
                except SystemExit as exit:
                    raise AssertionError(f"{block.where}: `{shlex.join(words)}` is refused by the command line") \
                        from exit
            elif words[:3] == ["python", "-m", "pytest"] and "-m" in words[3:]:
                names = set(re.findall(r"\w+", words[words.index("-m", 3) + 1])) - {"not", "and", "or"}
                assert names <= markers, f"{block.where}: unregistered markers {names - markers}"


def test_ci_runs_the_readme_test_command():
    readme = [block for block in blocks(ROOT / "README.md") if block.lang == "bash" and "pytest -q\n" in block.code
              and "-m" not in block.code.split("pytest", 1)[1]]
    assert readme, "the README gives the full test command in a ```bash block"
    command = readme[0].code.strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().splitlines()[-1] == command, f".ci/run's last line is not the README's `{command}`"
