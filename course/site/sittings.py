"""`<!-- course:sitting-time -->`: how long re-verifying the course took, from the record's sittings.

course/gpu_run.py notes each command of a sitting in the record (when it started and ended, how many
GPUs, whether it ran every item or only the stale ones, what it left incomplete); course.record's
sitting_summary turns a sitting's commands into its span. The text names the last sitting that
re-verified every item, and the latest sitting when that is a later, partial one."""

from __future__ import annotations

import html
import time

from .. import record


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _describe(s: dict) -> str:
    commands = "one command" if s["commands"] == 1 else f"{s['commands']} commands"
    return (f"sitting {html.escape(s['sitting'])} on {html.escape(', '.join(s['gpus']))} GPU: "
            f"{_duration(s['wall_s'])} from its first command's start ({_when(s['started'])}) to its last "
            f"result, in {commands}, builds included; {s['passed']} item{'' if s['passed'] == 1 else 's'} passed"
            + (f", {s['skipped']} skipped (the machine lacked what they need, such as a second GPU)"
               if s.get("skipped") else "")
            + (f", {s['not_passed'] - s.get('skipped', 0)} failed or were flagged"
               if s["not_passed"] - s.get("skipped", 0) else "")
            + (f" ({s['needing_more_gpus']} units need more GPUs than it had)" if s["needing_more_gpus"] else ""))


def sitting_time(rec: dict) -> str:
    latest, whole = record.latest_sittings(rec)
    if latest is None:
        return ("No sitting in the GPU record has noted when its commands started and ended yet, so the time "
                "a whole re-verification takes is not known from the record; it appears here after the next "
                "GPU run.\n")
    if whole is None:
        text = ("No sitting in the GPU record has re-verified every GPU item yet. The latest, "
                f"{_describe(latest)}, ran only part of them.\n")
    else:
        text = f"The last whole re-verification: {_describe(whole)}.\n"
        if latest["sitting"] != whole["sitting"]:
            text += f"\nSince then, a partial one: {_describe(latest)}.\n"
    return text + "\n*Generated from `records/gpu-record.json` when the site was built.*\n"
