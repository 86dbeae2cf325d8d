"""The AWX side as code, without running anything: how tests/awx launches a template (survey answers, slices, the
inventory AWX writes), which templates may be sliced, and that the decision environment pins what the EE pins."""
import os
import sys

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests", "awx"))

from awxlib import awx_jobs, environments  # noqa: E402

TEMPLATES = dict((t["survey"], t) for t in awx_jobs.job_templates())


def test_survey_defaults_and_one_answer_typed_as_awx_sends_them():
    health = TEMPLATES["health"]
    assert awx_jobs.survey_extra_vars(health) == {
        "gpu_health_dry_run": "true", "gpu_health_temperature_threshold_c": 90.0, "gpu_health_ecc_error_threshold": 10,
        "gpu_health_uncordon_after": 3, "gpu_health_max_unhealthy_fraction": 0.25}
    out = awx_jobs.survey_extra_vars(health, {"gpu_health_dry_run": "false", "gpu_health_uncordon_after": "5"})
    assert out["gpu_health_dry_run"] == "false" and out["gpu_health_uncordon_after"] == 5
    with pytest.raises(ValueError, match="not a choice"):
        awx_jobs.survey_extra_vars(health, {"gpu_health_dry_run": "maybe"})
    with pytest.raises(ValueError, match="no survey question"):
        awx_jobs.survey_extra_vars(health, {"gpu_health_typo": 1})
    with pytest.raises(ValueError, match="required and has no default"):
        awx_jobs.survey_extra_vars(TEMPLATES["mig_reconfigure"])


def test_slices_are_awx_slices():
    hosts = ["h-%02d" % i for i in range(10, 0, -1)]
    slices = [awx_jobs.sliced_hosts(hosts, k, 3) for k in (1, 2, 3)]
    assert slices == [["h-01", "h-04", "h-07", "h-10"], ["h-02", "h-05", "h-08"], ["h-03", "h-06", "h-09"]]
    assert sorted(sum(slices, [])) == sorted(hosts)
    assert awx_jobs.sliced_hosts(hosts, 1, 1) == sorted(hosts)
    assert awx_jobs.effective_slice_count(5, ["a", "b"]) == 2 and awx_jobs.effective_slice_count(0, ["a"]) == 1


def test_the_inventory_script_holds_only_the_slice():
    stored = {"_meta": {"hostvars": {"a": {"x": 1}, "b": {}, "c": {}}},
              "all": {"children": ["ungrouped", "pool"]}, "pool": {"hosts": ["a", "b", "c"], "vars": {"v": 1}}}
    out = awx_jobs.awx_inventory(stored, {"site": "lab"}, 2, 2)
    assert out["pool"] == {"hosts": ["b"], "vars": {"v": 1}}
    assert out["_meta"]["hostvars"] == {"b": {"remote_tower_enabled": "true", "remote_tower_id": 1}}
    assert out["all"]["vars"] == {"site": "lab"}
    assert stored["pool"]["hosts"] == ["a", "b", "c"]  # the stored inventory is left as it is


def test_only_per_host_templates_take_the_slice_count():
    sliceable = sorted(s for s, t in TEMPLATES.items() if t.get("job_slice_count", 1) != 1)
    assert TEMPLATES["site"]["job_slice_count"] == 1
    assert sliceable == ["gpu_nodes"]
    assert TEMPLATES["gpu_nodes"]["job_slice_count"] == "{{ gpuops_awx_job_slice_count }}"
    for name in ("mig_reconfigure", "health"):
        assert TEMPLATES[name]["job_slice_count"] == 1
        with open(os.path.join(TOP, TEMPLATES[name]["playbook"])) as f:
            assert "Refuse to run as one slice of a sliced AWX job" in f.read(), name
    with open(os.path.join(TOP, "awx", "configure.yml")) as f:
        configure = f.read()
    assert 'job_slice_count: "{{ item.job_slice_count | default(1) }}"' in configure


def test_decision_environment_pins_what_the_ee_pins():
    ee = dict(line.split("==") for line in environments.python_requirements("ee"))
    de = dict(line.split("==") for line in environments.python_requirements("de"))
    assert "ansible-rulebook" in de and "ansible-rulebook" not in ee
    for name, version in de.items():
        if name in ee:
            assert ee[name] == version, "%s: EE pins %s, DE %s" % (name, ee[name], version)
    ee_colls = dict((c["name"], c.get("version")) for c in environments.collection_requirements("ee"))
    for c in environments.collection_requirements("de"):
        assert ee_colls.get(c["name"]) == c.get("version"), c


def test_environment_cache_key_follows_the_definition_files(tmp_path, monkeypatch):
    key = environments.fingerprint("ee")
    assert key == environments.fingerprint("ee") and key != environments.fingerprint("de")
    assert len(key) == 16


def test_rulebook_runs_the_collections_health_playbook():
    with open(os.path.join(TOP, "extensions", "eda", "rulebooks", "gpu_health_alerts.yml")) as f:
        rulesets = yaml.safe_load(f)
    (ruleset,) = rulesets
    assert ruleset["execution_strategy"] == "sequential"
    assert "localhost" in ruleset["hosts"]  # the limit must keep the controller plays
    runs = [r for r in ruleset["rules"] if "run_playbook" in r.get("action", {})]
    assert [r["action"]["run_playbook"]["name"] for r in runs] == ["gpuops.k8s.health"] * 2
    for rule in runs:
        assert rule["throttle"]["group_by_attributes"] == ["event.fingerprint"]
        assert rule["action"]["run_playbook"]["lock"] == "gpuops-gpu-health"
        assert rule["action"]["run_playbook"]["extra_vars"]["gpu_health_alert"] == "{{ event }}"


def test_replan_rulebook_runs_the_replan_playbook_with_its_own_variables():
    with open(os.path.join(TOP, "extensions", "eda", "rulebooks", "gpu_replan.yml")) as f:
        (ruleset,) = yaml.safe_load(f)
    assert ruleset["execution_strategy"] == "sequential" and "localhost" in ruleset["hosts"]
    (source,) = ruleset["sources"]
    assert "gpuops.k8s.pending_gpu_pods" in source
    assert os.path.isfile(os.path.join(TOP, "extensions", "eda", "plugins", "event_source", "pending_gpu_pods.py"))
    runs = [r for r in ruleset["rules"] if "run_playbook" in r.get("action", {})]
    assert [r["action"]["run_playbook"]["name"] for r in runs] == ["gpuops.k8s.replan"]
    action = runs[0]["action"]["run_playbook"]
    assert action["lock"] == "gpuops-replan"
    with open(os.path.join(TOP, "playbooks", "replan.meta.yml")) as f:
        options = yaml.safe_load(f)["argument_specs"]["main"]["options"]
    assert sorted(set(action["extra_vars"]) - set(options)) == []
    assert action["extra_vars"]["replan_trigger"] == "{{ event.pending_gpu_pods }}"


def test_schedules_are_valid_rrules_with_their_own_name_and_variables():
    """Every scheduled template's rrule is what AWX parses (DTSTART plus one RRULE); the usage report runs daily and
    the health check every minute, armed; configure.yml takes the name and the variables from the template."""
    from dateutil import rrule
    scheduled = dict((s, t) for s, t in TEMPLATES.items() if t.get("schedule_rrule"))
    assert sorted(scheduled) == ["health", "usage_report"]
    for name, t in scheduled.items():
        dtstart, rule = t["schedule_rrule"].split(" ", 1)
        assert dtstart.startswith("DTSTART:") and rule.startswith("RRULE:"), name
        assert next(iter(rrule.rrulestr(t["schedule_rrule"].replace(" ", "\n")))) and t["schedule_name"], name
    rule = rrule.rrulestr(scheduled["usage_report"]["schedule_rrule"].replace(" ", "\n"))
    days = list(rule[:2])
    assert (days[1] - days[0]).total_seconds() == 86400 and days[0].hour == 6
    assert scheduled["health"]["schedule_extra_data"] == {"gpu_health_dry_run": False}
    assert "schedule_extra_data" not in scheduled["usage_report"]
    with open(os.path.join(TOP, "awx", "configure.yml")) as f:
        configure = f.read()
    assert 'name: "{{ item.schedule_name }}"' in configure
    assert 'extra_data: "{{ item.schedule_extra_data | default({}) }}"' in configure
