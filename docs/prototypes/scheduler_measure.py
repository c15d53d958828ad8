"""Measure every prototype (docs/scheduler.md): `python scheduler_measure.py [--repeats 3]`.

Runs each mechanism with 8 and 16 members, alone and with 4 messages between members
(median of `repeats` runs, each in a fresh process), then a person's question while
calls are in flight, token streaming, and kill -9 at several points of a chatty 8-member
run followed by a resume in a new process. Prints markdown tables; writes results.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from scheduler_common import last_json, run_scenario

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "slices": "scheduler_slices.py",
    "completions": "scheduler_completions.py",
    "members": "scheduler_members.py",
}
KILL_AT = (10, 25, 40, 55, 70)


def run(mechanism: str, *flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / SCRIPTS[mechanism]), *flags], capture_output=True, text=True, check=True
    ).stdout
    row = last_json(out)
    row.pop("hist", None)
    return row


def median_run(mechanism: str, repeats: int, *flags: str) -> dict:
    rows = [run(mechanism, *flags) for _ in range(repeats)]
    rows.sort(key=lambda r: r["ratio"])
    best = dict(rows[len(rows) // 2])
    best["ratios"] = [round(r["ratio"], 3) for r in rows]
    return best


def speed(repeats: int) -> list[dict]:
    """Makespan / critical path and checkpoints per call: 8 and 16 members, alone and chatty."""
    rows = []
    print(
        "| mechanism | members | messages | makespan / critical (median; runs) | checkpoints (put) per call "
        "| put_writes per call | parent supersteps | problems |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mech in SCRIPTS:
        for n in (8, 16):
            for chatty in (False, True):
                r = median_run(mech, repeats, "--members", str(n), *(["--chatty"] if chatty else []))
                rows.append(r)
                probs = r["problems"] + r["next_call_problems"]
                print(
                    f"| {mech} | {n} | {4 if chatty else 0} | {r['ratio']:.2f} ({', '.join(map(str, r['ratios']))}) "
                    f"| {r['puts_per_call']:.2f} | {r['put_writes'] / r['calls_this_process']:.2f} "
                    f"| {r['supersteps']} | {len(probs) or 'none'} |",
                    flush=True,
                )
    return rows


def human() -> list[dict]:
    """A person's question while other calls are in flight (answered after 0.3 s)."""
    rows = []
    print(
        "\n| mechanism | person's question (0.3 s to answer) | wall s | makespan / critical without the pause "
        "| calls that finished during the pause | problems |"
    )
    print("|---|---|---|---|---|---|")
    for mech in SCRIPTS:
        for mode in ("eager", "deferred") if mech == "completions" else ("eager",):
            r = run(mech, "--members", "8", "--human", mode)
            rows.append(r)
            print(
                f"| {mech} | {mode} | {r['wall_s']:.2f} | {r['ratio']:.2f} "
                f"| {r.get('calls_finished_during_pause', 0)} "
                f"| {len(r['problems']) or 'none'} |",
                flush=True,
            )
    return rows


def stream() -> list[dict]:
    """Token streaming (stream_mode="messages", subgraphs=True) of a chatty 8-member run."""
    rows = []
    print(
        "\n| mechanism | token chunks streamed (stream_mode=messages) | calls streamed | calls tagged per agent "
        "| calls whose tokens crossed a superstep boundary |"
    )
    print("|---|---|---|---|---|")
    for mech in SCRIPTS:
        r = run(mech, "--members", "8", "--chatty", "--stream")
        rows.append(r)
        print(
            f"| {mech} | {r['chunks']} | {r['calls_streamed']} | {len(r['agents_tagged'])} agents "
            f"| {r['calls_streaming_across_supersteps']} |",
            flush=True,
        )
    return rows


def crash() -> list[dict]:
    """kill -9 at several points of a chatty 8-member run, resume in a new process."""
    rows = []
    print(
        "\n| mechanism | kill -9 after N finished calls | calls made after resume | finished calls redone "
        "| histories identical to an uncrashed run (two uncrashed runs identical?) | prefix kept, every call "
        "once, messages read once at the next call |"
    )
    print("|---|---|---|---|---|---|")
    for mech in SCRIPTS:
        for at in KILL_AT:
            with tempfile.TemporaryDirectory() as tmp:
                c = run_scenario(str(HERE / SCRIPTS[mech]), 8, Path(tmp), chatty=True, kill_at_calls=at)
            c.pop("reference", None)
            c["mechanism"] = mech
            rows.append(c)
            print(
                f"| {mech} | {at} | {c['calls_after_resume']} | {c['redone_completed']} "
                f"| {'yes' if c['histories_identical'] else 'no: ' + ', '.join(c['agents_differing'])} "
                f"({'yes' if c['uncrashed_runs_identical'] else 'no'}) "
                f"| {'yes' if not c['problems'] else '; '.join(c['problems'])} |",
                flush=True,
            )
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--only",
        nargs="+",
        choices=["speed", "human", "stream", "crash"],
        default=["speed", "human", "stream", "crash"],
    )
    args = p.parse_args()
    path = HERE / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    sections = {"speed": lambda: speed(args.repeats), "human": human, "stream": stream, "crash": crash}
    for name in args.only:
        results[name] = sections[name]()
    path.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
