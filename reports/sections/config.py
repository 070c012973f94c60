"""What ran: policy, config path and digest (the rollback handle), target, pool, watermarks,
tenants, signals, versions, hardware and the final state; the full config one click away."""

from __future__ import annotations

from gates import Verdict
from record.run_record import RunRecord
from reports.page import details, esc, table


class ConfigSection:
    name = "config"
    title = "Config and digest"

    def render(self, record: RunRecord, verdict: Verdict) -> str:
        m = record.meta
        rows = [
            ("run id", m.run_id),
            ("mode", m.mode),
            ("policy", m.policy),
            ("config digest", m.config_digest),
            ("config path", m.config_path),
            ("scenarios", ", ".join(m.scenarios)),
            ("duration", f"{m.duration_s:.1f} s"),
            ("phases", ", ".join(f"{p.name} {p.start_s:g}–{p.end_s:g} s" for p in m.phases)),
            ("pool", m.pool.model_dump() if m.pool else "not reported"),
            ("watermarks", ", ".join(f"{k} {v:.0%}" for k, v in m.watermarks.items())),
            ("tenants", ", ".join(f"{n} ({t.traffic_class}, cap {t.max_kv_share:.0%})" for n, t in m.tenants.items())),
            ("signals", ", ".join(k for k, v in m.signals.model_dump().items() if v) or "none"),
            ("target", m.target),
            ("versions", m.versions),
            ("hardware", m.hardware),
            ("final state", m.final),
        ]
        body = table(["", ""], [[f"<b>{esc(k)}</b>", f"<code>{esc(v)}</code>"] for k, v in rows])
        return body + details("full config", m.config) + (details("notes", m.notes) if m.notes else "")
