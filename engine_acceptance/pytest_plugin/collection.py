"""What each collected check becomes before it runs: planned, skipped with the reason, failed
for a required capability, or a strict xfail for a known defect, and labelled for Allure.
"""

from __future__ import annotations

import pytest

from engine_acceptance.capabilities.registry import capability_of_marker
from engine_acceptance.profiles.expectations import ExpectedFailure, check_id, matching_records
from engine_acceptance.pytest_plugin.allure_report import label_for_allure
from engine_acceptance.pytest_plugin.keys import item_records_key, required_untested_key
from engine_acceptance.pytest_plugin.verdict import COVERS_PROPERTY, RECORDS_PROPERTY
from engine_acceptance.session import AcceptanceSession
from engine_acceptance.shortfalls import TRIAL_KIND_PROPERTY

__all__ = ["plan_items"]


def plan_items(items: list[pytest.Item], session: AcceptanceSession, records: list[ExpectedFailure], *,
               stale_records_fail: bool) -> None:
    """Skip checks of what the deployment does not serve; mark known defects as strict xfails."""
    for item in items:
        # Read back by the gate from every report (xdist workers' too): what this check covers.
        item.user_properties.append((COVERS_PROPERTY, ",".join(sorted(capabilities_tested_by(item)))))
        trials = item.get_closest_marker("trials")
        if trials is not None and trials.args:
            # And the kind of trial it samples, which a --trials shortfall concerns.
            item.user_properties.append((TRIAL_KIND_PROPERTY, str(trials.args[0])))
        for marker in item.iter_markers("requires"):
            for capability in marker.args:
                if session.model_profile.has(capability):
                    continue
                if capability in session.required:
                    # A skip that hides a required capability is a failure, not a skip.
                    item.stash[required_untested_key] = (f"required capability {capability!r}: "
                                                         f"{session.skip_reason(capability)}")
                else:
                    item.add_marker(pytest.mark.skip(reason=session.skip_reason(capability)))
        # Records name checks as module::test[param] (check_id), so they match wherever the suite is installed.
        known = matching_records(records, check_id(item.nodeid), engine=session.engine.kind,
                                 version=session.engine.version, model=session.engine.model)
        if known:
            item.stash[item_records_key] = known
            # Read back by the gate: only a recorded check's xfail is a known defect (verdict.GateCollector).
            item.user_properties.append((RECORDS_PROPERTY, " | ".join(record.origin or "record" for record in known)))
            item.add_marker(pytest.mark.xfail(strict=stale_records_fail,
                                              reason=" | ".join(r.xfail_reason() for r in known)))
        label_for_allure(item, session)


def capabilities_tested_by(item: pytest.Item) -> set[str]:
    covers = {name for marker in item.iter_markers("requires") for name in marker.args}
    covers |= {capability for marker, capability in capability_of_marker().items() if item.get_closest_marker(marker)}
    return covers
