"""The router's ledger, in layers; each layer imports only the ones below it.

    book       the working copy of one pass: ids, records, updates
    mail       post, notify, bounce, flush inboxes into histories
    waits      open tool calls and their answers
    requests   open, route, answer, decide, time out
    work       the task board and skills (governance effects)
    lifecycle  agents join and leave
    turns      steps, outputs, ping-pong, turn ends, stops
    liveness   reminders, deadlocks, deadlines, the run budget, the final report
    schedule   who steps next

``teamgraph/graph/router.py`` is the LangGraph adapter that runs one pass.
"""

from teamgraph.ledger.book import Ledger

__all__ = ["Ledger"]
