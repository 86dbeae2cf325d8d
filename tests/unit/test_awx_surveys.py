"""Every AWX survey (awx/surveys/*.yml) against its playbook's argument spec (playbooks/<name>.meta.yml).

AWX has been known to accept malformed surveys silently (awx#8986), so the check happens here: each
job template points at an existing playbook and survey; each question names a variable the playbook
declares, with a compatible type, choices the spec allows, and a default the spec accepts.
"""
import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AWX = os.path.join(TOP, "awx")
PLAYBOOKS = os.path.join(TOP, "playbooks")

# survey type -> argument spec types it can feed
COMPATIBLE = {
    "text": {"str", "path", "raw"},
    "textarea": {"str", "raw"},
    "password": {"str"},
    "integer": {"int"},
    "float": {"float"},
    "multiplechoice": {"str", "bool", "int"},
    "multiselect": {"list"},
}
BOOL_CHOICES = {"true", "false"}


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def playbook_options(playbook):
    """Options of a playbook's spec; site.yml = the union of the playbooks it imports."""
    name = os.path.splitext(os.path.basename(playbook))[0]
    meta = os.path.join(PLAYBOOKS, name + ".meta.yml")
    if os.path.exists(meta):
        return _load(meta)["argument_specs"]["main"]["options"]
    options = {}
    for play in _load(os.path.join(TOP, playbook)):
        imported = play.get("ansible.builtin.import_playbook")
        assert imported, "%s has no %s.meta.yml and is not made of imports" % (playbook, name)
        options.update(playbook_options(os.path.join("playbooks", imported)))
    return options


TEMPLATES = _load(os.path.join(AWX, "job_templates.yml"))["gpuops_awx_job_templates"]


def test_one_job_template_per_playbook():
    """Every production playbook (the top of playbooks/) is one AWX job; the lab's (playbooks/lab/) are none."""
    playbooks = sorted(f for f in os.listdir(PLAYBOOKS) if f.endswith(".yml") and not f.endswith(".meta.yml"))
    assert sorted(os.path.basename(t["playbook"]) for t in TEMPLATES) == playbooks
    assert all(os.path.dirname(t["playbook"]) == "playbooks" for t in TEMPLATES)
    assert {"sim_lab.yml", "sim_k8s_nodes.yml", "demo_mig.yml", "demo.yml"} <= set(os.listdir(os.path.join(PLAYBOOKS, "lab")))


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t["survey"])
def test_survey_matches_argument_spec(template):
    assert os.path.isfile(os.path.join(TOP, template["playbook"]))
    survey = _load(os.path.join(AWX, "surveys", template["survey"] + ".yml"))
    assert survey["name"] and survey["description"] and survey["spec"]
    options = playbook_options(template["playbook"])
    seen = set()
    defaults = {}
    for q in survey["spec"]:
        var = q["variable"]
        assert var not in seen, "question %s twice" % var
        seen.add(var)
        assert q.get("question_name"), var
        assert var in options, "survey variable %s is not in the argument spec of %s (valid: %s)" % (
            var, template["playbook"], ", ".join(sorted(options)))
        spec = options[var]
        want = spec.get("type", "str")
        assert q["type"] in COMPATIBLE, "unknown survey type %s" % q["type"]
        assert want in COMPATIBLE[q["type"]], "%s: survey type %s cannot feed %s" % (var, q["type"], want)
        if q["type"] == "multiplechoice":
            choices = [str(c) for c in q["choices"]]
            if want == "bool":
                assert set(choices) == BOOL_CHOICES, var
            elif spec.get("choices"):
                assert set(choices) <= set(str(c) for c in spec["choices"]), var
        if spec.get("required"):
            assert q.get("required") is True, "%s is required by the spec but optional in the survey" % var
        if "default" in q:
            defaults[var] = q["default"]
        if q["type"] in ("integer", "float") and "default" in q:
            assert q.get("min", q["default"]) <= q["default"] <= q.get("max", q["default"]), var
    # the defaults the survey would send must pass the playbook's own validation
    validator = ArgumentSpecValidator(dict((k, options[k]) for k in defaults))
    result = validator.validate(defaults)
    assert not result.error_messages, result.error_messages
    # every required option of the playbook is asked
    missing = [k for k, v in options.items() if v.get("required") and k not in seen]
    assert not missing, "required options not asked by the survey: %s" % missing
