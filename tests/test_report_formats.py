"""Leader spec's output formats: the leader's prompt teaches them, the CLI renders them as openable paths."""

from __future__ import annotations

from io import StringIO

from langchain_core.messages import ToolMessage
from rich.console import Console
from scripting import act, call

from teamgraph import ScriptedChatModel, Team
from teamgraph.cli.links import render_links, sources_in
from teamgraph.cli.summary import print_summary
from teamgraph.records import LEADER
from teamgraph.roles.prompts import leader_prompt
from teamgraph.tools.search import format_results, source_id

URL = "https://example.org/auth"


def test_the_leader_prompt_teaches_file_links_and_citations(tmp_path):
    """Leader spec (file download links, file cards, inline citations): the formats are in the leader's prompt."""
    team = Team(model=ScriptedChatModel({}), home=tmp_path / "home")
    roles = team.runtime.roles
    prompt = leader_prompt(roles["team-leader"], roles=roles, agents={}, pending=[], team={})
    for marker in ("](download://", "<show_file path=", "【cite:src_", "【file:"):
        assert marker in prompt, marker


def test_file_links_and_citations_render_as_paths_and_urls(tmp_path):
    """Leader spec's markers become what a terminal user can open: absolute paths and URLs."""
    project = tmp_path / "project" / "t"
    sources = sources_in(
        {LEADER: [ToolMessage(format_results([{"title": "Auth", "url": URL}]), tool_call_id="1", name="web_search")]}
    )
    text = (
        f'Done: [Login page](download://web/login.html). <show_file path="notes.md"></show_file> '
        f"Cookies revoke easily.【cite:{source_id(URL)}】 See 【file:api/auth.py#L3-9】. Unknown 【cite:src_0】."
    )
    shown = render_links(text, project=project, sources=sources)
    assert f"Login page ({(project / 'web' / 'login.html').resolve()})" in shown
    assert f"File: {(project / 'notes.md').resolve()}" in shown
    assert f"[{URL}]" in shown and f"[{(project / 'api' / 'auth.py').resolve()}]" in shown
    assert "【cite:src_0】" in shown and "download://" not in shown


def test_the_cli_summary_shows_the_reports_file_link_as_a_path(tmp_path):
    """Leader spec (file links for files written) in ``teamgraph run``'s summary."""
    script = {
        LEADER: [
            act(call("write_file", path="web/login.html", content="<form></form>")),
            "The page: [Login page](download://web/login.html)",
        ]
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home")
    graph = team.compile()
    graph.invoke({"messages": [("user", "Build it.")]}, {"configurable": {"thread_id": "r"}})
    out = Console(file=StringIO(), width=400, color_system=None)
    print_summary(out, team, graph, "r")
    printed = out.file.getvalue().split("Who did what")[0]  # NOTE: the report's panel
    path = team.runtime.project_folder({"configurable": {"thread_id": "r"}}) / "web" / "login.html"
    assert str(path.resolve()) in printed and "download://" not in printed
