"""The "is my run working" monitors raise the right warnings, once per window, and stay quiet on healthy runs."""

import json

from harness.cfg.trainer import MonitorSection
from trainer.monitors import MetricsWriter, Monitors


def _healthy(step, **over):
    m = {
        "step": step,
        "frac_reward_zero_std": 0.1,
        "reward/total/scored_frac": 1.0,
        "reward/total/mean": 0.1 * step,
        "completions/mean_length": 20.0,
        "completions/clipped_ratio": 0.0,
        "kl": 0.01,
        "reward/r/unscored_frac": 0.0,
    }
    m.update(over)
    return m


def test_healthy_run_is_quiet():
    mon = Monitors(MonitorSection(window=4), ["r"])
    assert [w for s in range(1, 20) for w in mon.update(s, _healthy(s))] == []


def test_variance_collapse_needs_window_steps_in_a_row():
    mon = Monitors(MonitorSection(window=3, zero_variance_frac=0.9), ["r"])
    assert mon.update(1, _healthy(1, frac_reward_zero_std=1.0)) == []
    assert mon.update(2, _healthy(2, frac_reward_zero_std=1.0)) == []
    assert mon.update(3, _healthy(3, frac_reward_zero_std=0.5)) == []  # streak broken
    out = [w for s in range(4, 7) for w in mon.update(s, _healthy(s, frac_reward_zero_std=0.95))]
    assert len(out) == 1 and "variance collapse" in out[0] and out[0].startswith("step 6")


def test_length_bias_when_length_climbs_and_reward_is_flat():
    mon = Monitors(MonitorSection(window=6), ["r"])
    out = []
    for s in range(1, 7):
        out += mon.update(s, _healthy(s, **{"reward/total/mean": 0.5, "completions/mean_length": 10.0 * s}))
    assert any("length bias" in w for w in out)
    mon2 = Monitors(MonitorSection(window=6), ["r"])  # length climbs but so does the reward: no warning
    out2 = [w for s in range(1, 7) for w in mon2.update(s, _healthy(s, **{"completions/mean_length": 10.0 * s}))]
    assert not any("length bias" in w for w in out2)


def test_kl_truncation_unscored_and_all_unscored():
    mon = Monitors(MonitorSection(window=5, kl_max=0.5, truncated_frac=0.5, unscored_frac=0.1), ["r"])
    out = mon.update(
        1,
        _healthy(
            1,
            kl=0.9,
            **{
                "completions/clipped_ratio": 0.75,
                "reward/r/unscored_frac": 0.25,
                "reward/r/statuses": "4 timeout",
                "reward/total/scored_frac": 0.0,
            },
        ),
    )
    text = "\n".join(out)
    assert "KL to the reference is 0.9" in text
    assert "75% of completions" in text
    assert "set trainer.mask_truncated: true" in text  # the config key, spelled as in a run config
    assert "reward 'r' left 25% of samples unscored (4 timeout)" in text
    assert "every sample of this batch is unscored" in text
    assert mon.update(2, _healthy(2, kl=0.9)) == []  # repeated at most once per window
    assert any("KL" in w for w in mon.update(6, _healthy(6, kl=0.9)))
    masked = Monitors(MonitorSection(truncated_frac=0.5), ["r"], mask_truncated=True)
    (warning,) = masked.update(1, _healthy(1, **{"completions/clipped_ratio": 0.75}))
    assert "raise trainer.max_completion_length" in warning and "set trainer.mask_truncated" not in warning


def test_metrics_writer_truncates_to_the_resumed_step(tmp_path):
    p = tmp_path / "metrics.jsonl"
    w = MetricsWriter(p)
    for s in range(1, 6):
        w.write({"step": s})
    p.write_text(p.read_text() + '{"step": 6, "lo')  # a line cut by a kill
    MetricsWriter(p, resume_from_step=3).write({"step": 4})
    assert [json.loads(x)["step"] for x in p.read_text().splitlines()] == [1, 2, 3, 4]
    MetricsWriter(p)  # a fresh run starts a fresh file
    assert not p.exists()
