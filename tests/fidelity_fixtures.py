"""Helpers to assert on envelopes by their fields (title, sender, ids, tag, body), not their wording."""

from __future__ import annotations

from teamgraph.messaging.envelopes import Envelope, parse


def env(title: str, sender: str, tag: str, body: str, **fields: str) -> Envelope:
    """The envelope a test expects: ``env("Result", "UI Operator_1", "Output", "Done.", id="out_1")``."""
    return Envelope(title=title, sender=sender, fields=fields, tag=tag, body=body)


def parsed(text: str) -> Envelope:
    """``text`` read back as one envelope (fails the test if it is not one)."""
    envelope = parse(text)
    assert envelope is not None, f"not an envelope: {text!r}"
    return envelope


def envelopes_in(run, name: str) -> list[Envelope]:
    """Every envelope that reached ``name`` (notices and user input left out), in order."""
    chunks = [chunk for text in run.inbox_texts(name) for chunk in text.split("\n\n")]
    return [e for e in map(parse, chunks) if e is not None]


def has_envelope(text: str, **want: str) -> bool:
    """Whether ``text`` (one or several envelopes) holds an envelope with every field in ``want``.

    ``want`` names envelope keys (``title``, ``sender``, ``tag``, ``body``) or header
    fields (``id``, ``to``, ``respond``, ``note``): ``has_envelope(text, title="Result", id="out_1")``.
    """
    for chunk in text.split("\n\n"):
        envelope = parse(chunk)
        if envelope is None:
            continue
        flat = {**envelope["fields"], **{k: v for k, v in envelope.items() if k != "fields"}}
        if all(flat.get(key) == value for key, value in want.items()):
            return True
    return False


Brief = tuple[str, str, str, str, str]
"""An envelope in short: (title, sender, id or to, tag, body)."""


def brief(title: str, sender: str, tag: str, body: str, ref: str = "") -> Brief:
    """The short form a test expects: ``brief("Call", "Team Leader", "Call", "Hi", "ask_1")``."""
    return (title, sender, ref, tag, body)


def briefs_in(run, name: str) -> list[Brief | str]:
    """Everything that reached ``name``, one item per envelope: its short form, or the text of a notice."""
    out: list[Brief | str] = []
    for chunk in (c for text in run.inbox_texts(name) for c in text.split("\n\n")):
        e = parse(chunk)
        ref = (e["fields"].get("id") or e["fields"].get("to") or "") if e else ""
        out.append(chunk if e is None else (e["title"], e["sender"], ref, e["tag"], e["body"]))
    return out


def template_fields(text: str) -> dict[str, str] | None:
    """A sessions_send request read back: its header fields, ``user request``, ``message``, ``context summary``.

    None if ``text`` does not follow the request template.
    """
    lines = text.split("\n")
    if lines[0] != "[Agent-to-agent communication]" or lines.count("---") != 2:
        return None
    first, second = lines.index("---"), len(lines) - 1 - lines[::-1].index("---")
    fields = dict(line.split(": ", 1) for line in lines[1:first])
    fields["user request"] = lines[first + 1].removeprefix("user request: ")
    fields["message"] = "\n".join(lines[first + 2 : second])
    fields["context summary"] = "\n".join(lines[second + 1 :]).removeprefix("context summary: ")
    return fields


def received(run, name: str) -> list:
    """Everything that reached ``name``: envelopes as dicts (a request template's body as its fields,
    without the ``respond`` wording), notices as their text."""
    out: list = []
    for chunk in (c for text in run.inbox_texts(name) for c in text.split("\n\n")):
        e = parse(chunk)
        if e is None:
            out.append(chunk)
            continue
        fields = {k: v for k, v in e["fields"].items() if k != "respond"}
        out.append({**e, "fields": fields, "body": template_fields(e["body"]) or e["body"]})
    return out
