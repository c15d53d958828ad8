"""kill -9 in the middle of a prototype run, resume in a new process (docs/scheduler.md).

Run: ``python scheduler_crash.py completions|slices [--members 8] [--chatty] [--at 40]``.
Prints the comparison with an uncrashed run as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from scheduler_common import run_scenario

SCRIPTS = {
    "completions": "scheduler_completions.py",
    "slices": "scheduler_slices.py",
    "members": "scheduler_members.py",
}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("mechanism", choices=sorted(SCRIPTS))
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--chatty", action="store_true")
    p.add_argument("--at", type=int, default=40, help="kill after this many finished model calls")
    args = p.parse_args()
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as tmp:
        out = run_scenario(
            str(here / SCRIPTS[args.mechanism]), args.members, Path(tmp), chatty=args.chatty, kill_at_calls=args.at
        )
    print(json.dumps({"mechanism": args.mechanism, "members": args.members, "chatty": args.chatty, **out}))
