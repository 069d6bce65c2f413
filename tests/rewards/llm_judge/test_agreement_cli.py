"""``harness judge-agreement`` end to end: the judge (a scripted server whose verdict follows a rule) against
the real ``math`` reward on a file, with the JSON output checked against the table the rule implies."""

from __future__ import annotations

import json
import re
from pathlib import Path

from scripted_server import ScriptedServer

from harness.cli import main


def _verdict(body: dict) -> str:
    """Say yes when the reference appears inside the answer, except for answers that mention 'seven'."""
    text = body["messages"][0]["content"]
    ref = re.search(r"<reference>\n(.*?)\n</reference>", text, re.S).group(1)  # type: ignore[union-attr]
    ans = re.search(r"<answer>\n(.*?)\n</answer>", text, re.S).group(1)  # type: ignore[union-attr]
    if "seven" in ans:
        return "unsure"
    return f"Compared.\nVERDICT: {'yes' if ref in ans else 'no'}"


def test_judge_agreement_command(scripted: ScriptedServer, tmp_path: Path, capsys) -> None:
    scripted.responder = _verdict
    rows = [
        {"prompt": "1+1", "answer": "2", "completion": r"\boxed{2}"},  # judge pass, math pass
        {"prompt": "2+2", "answer": "4", "completion": r"\boxed{5}"},  # fail, fail
        {"prompt": "1/2", "answer": "0.5", "completion": r"\boxed{\frac12}"},  # judge fail, math pass
        {"prompt": "3+3", "answer": "6", "completion": r"\boxed{7} not 6"},  # judge pass, math fail
        {"prompt": "3+4", "answer": "7", "completion": r"seven \boxed{7}"},  # judge unscored (error: no verdict)
        {"prompt": "5+5", "answer": "10", "completion": r"\boxed{10}"},  # pass, pass
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    out = tmp_path / "agreement.json"
    rc = main(
        [
            "judge-agreement",
            "--reward",
            "llm_judge",
            "--param",
            f"llm_judge.base_url={scripted.url}",
            "--param",
            "llm_judge.model=scripted",
            "--param",
            f"llm_judge.cache_dir={tmp_path / 'cache'}",
            "--against",
            "math",
            "--data",
            str(data),
            "--output",
            str(out),
            "--workers",
            "1",
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["pairs"] == 5 and res["bad_rows"] == 1 and res["judge_unscored"] == 1
    assert res["table"] == {"fail/fail": 1, "fail/pass": 1, "pass/fail": 1, "pass/pass": 2}
    # p_o = 3/5; p_judge(pass) = 3/5, p_math(pass) = 3/5: p_e = 9/25 + 4/25 = 13/25; kappa = (2/25) / (12/25)
    assert abs(res["agreement"] - 0.6) < 1e-12 and abs(res["kappa"] - 1 / 6) < 1e-12
    assert res["judge_statuses"] == {"ok": 5, "error": 1}
    printed = capsys.readouterr().out
    assert "Cohen's kappa 0.167" in printed and "llm_judge vs math: 5 pairs" in printed
