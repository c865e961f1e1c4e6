"""The approval classifier and rules: what a cell does, read from its AST, and the verdict of ordered rules.

The corpus (``tests/approval_corpus/``) is the measurement the issue asks for: under the default rules
at least 80% of the read-only inspection cells run without asking and none of the adversarial ones do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentstack_lab.approval import BUILTIN_DENIES, ApprovalPolicy, classify
from agentstack_lab.config import Config, ConfigError

CORPUS = Path(__file__).parent / "approval_corpus"


def corpus(name: str) -> list[str]:
    return json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))


# --- classifier ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "expected"), [
    ("df.head()", {"read_only"}),
    ("print(len(df), df.shape)", {"read_only"}),
    ("df.groupby('a')['b'].sum().sort_values().tail(3)", {"read_only"}),
    ("x = df.describe()", {"rebinds"}),
    ("df['a'] = 1", {"mutates"}),
    ("lst.append(1)", {"mutates"}),
    ("df.drop(columns=['a'], inplace=True)", {"mutates"}),
    ("open('a.csv').read()", {"file_read"}),
    ("df.to_csv('out.csv')", {"file_write"}),
    ("df.to_csv('/elsewhere/out.csv')", {"file_write", "write_outside"}),
    ("Path('../up.txt').write_text('x')", {"file_write", "write_outside"}),
    ("shutil.rmtree('data')", {"file_delete"}),
    ("requests.get('http://example.com')", {"network"}),
    ("pd.read_csv('https://example.com/a.csv')", {"file_read", "network"}),
    ("import os; os.system('ls')", {"imports", "subprocess"}),
    ("from subprocess import run as go\ngo('ls')", {"imports", "subprocess"}),
    ("exec('x = 1')", {"dynamic"}),
    ("model.fit(X, y)", {"mutates"}),
    ("model.predict(X)", {"unknown"}),
    ("!ls", {"unknown"}),
])
def test_classes_of_typical_cells(code, expected, tmp_path):
    assert classify(code, tmp_path).classes == expected


def test_each_class_comes_with_its_line_and_snippet(tmp_path):
    found = classify("n = len(df)\nimport os\nos.system('rm -rf ~')", tmp_path)
    assert found.classes == {"rebinds", "imports", "subprocess"}
    (reason,) = found.reasons["subprocess"]
    assert (reason.line, reason.snippet) == (3, "os.system('rm -rf ~')") and "shell command" in reason.why
    assert found.reasons["rebinds"][0].line == 1 and not found.read_only
    with pytest.raises(AttributeError):   # the result is frozen
        found.classes = frozenset()  # type: ignore[misc]


@pytest.mark.parametrize("code", [
    "getattr(os, 'sys' + 'tem')('ls')",      # computed attribute name
    "__builtins__.eval('1')",
    "().__class__.__bases__[0].__subclasses__()",
    "globals()['df'] = None",
    "exec(base64.b64decode('cHJpbnQoMSk='))",
    "f\"{eval('1')}\"",
    "[c for c in [1] if eval('1')]",
    "e = eval",
    "importlib.import_module('os')",
    "pickle.loads(blob)",
])
def test_dynamic_code_is_named(code, tmp_path):
    assert "dynamic" in classify(code, tmp_path).classes


def test_names_resolve_through_the_cells_own_imports(tmp_path):
    assert "subprocess" in classify("import os as o\no.system('x')", tmp_path).classes
    assert "subprocess" in classify("getattr(os, 'system')('x')", tmp_path).classes   # literal getattr
    # a variable that only shares a module's name is not that module unless the cell imports it
    assert classify("signal.mean()", tmp_path).classes == {"read_only"}
    assert "subprocess" in classify("import signal\nsignal.pthread_kill(1, 9)", tmp_path).classes


def test_unknown_is_never_safe(tmp_path):
    for code in ("helper(df)", "df.frobnicate()", "df.apply(my_function)", "sorted(xs, key=f)", "while True: pass"):
        assert "unknown" in classify(code, tmp_path).classes, code


def test_literal_write_targets_are_resolved_against_the_working_folder(tmp_path):
    here = tmp_path / "project"
    (here / "sub").mkdir(parents=True)
    (here / "escape").symlink_to(tmp_path)
    inside = ["out.csv", "sub/out.csv", str(here / "out.csv")]
    outside = ["../out.csv", "/tmp/x.csv", "~/x.csv", "escape/x.csv", "sub/../../x.csv"]
    for path in inside:
        assert classify(f"df.to_csv({path!r})", here).classes == {"file_write"}, path
    for path in outside:
        assert "write_outside" in classify(f"df.to_csv({path!r})", here).classes, path
    computed = classify("df.to_csv(out_path)", here)
    assert computed.classes == {"file_write", "unknown"}   # where it writes is not known: never safe


def test_syntax_errors_and_nul_bytes_are_unknown(tmp_path):
    for code in ("def (", "x = '\0'\0", "%%bash\nls"):
        found = classify(code, tmp_path)
        assert found.classes == {"unknown"} and "does not parse" in found.reasons["unknown"][0].why


# --- rules ---------------------------------------------------------------------------------------------

def test_default_rules_allow_read_only_ask_the_rest_and_deny_the_built_in_list(tmp_path):
    policy = ApprovalPolicy()
    assert (v := policy.decide("df.head()", cwd=tmp_path)).action == "allow" and v.rule == "allow-read-only"
    assert (v := policy.decide("x = 1", cwd=tmp_path)).action == "ask" and v.rule is None
    for code, rule in [("os.system('ls')", "deny-subprocess"), ("requests.get('http://x')", "deny-network"),
                       ("shutil.rmtree('d')", "deny-delete"), ("df.to_csv('/tmp/o.csv')", "deny-write-outside")]:
        v = policy.decide(code, cwd=tmp_path)
        assert (v.action, v.rule) == ("deny", rule), code
        assert "line 1" in v.reason


def _policy(rules: list[dict], *, session: str | None = None, allow_read_only: bool = True) -> ApprovalPolicy:
    cfg = Config.from_dict({"approval": {"rules": rules, "allow_read_only": allow_read_only}})
    return ApprovalPolicy.from_config(cfg.approval, session_id=session)


def test_the_last_matching_rule_wins(tmp_path):
    policy = _policy([{"id": "allow-local", "action": "allow", "only": ["read_only", "rebinds", "file_write"]},
                      {"id": "ask-csv", "action": "ask", "code": r"to_csv"}])
    assert policy.decide("x = df.head()", cwd=tmp_path).rule == "allow-local"
    v = policy.decide("df.to_csv('out.csv')", cwd=tmp_path)
    assert (v.action, v.rule) == ("ask", "ask-csv")
    # a later deny beats the default allow
    v = _policy([{"id": "no-prints", "action": "deny", "code": r"\bprint\("}]).decide("print(1)", cwd=tmp_path)
    assert (v.action, v.rule) == ("deny", "no-prints")
    assert _policy([], allow_read_only=False).decide("df.head()", cwd=tmp_path).action == "ask"


def test_a_built_in_deny_is_lifted_only_by_a_rule_that_names_it(tmp_path):
    broad = _policy([{"id": "allow-all", "action": "allow", "any_of": ["network", "imports", "unknown"]}])
    assert broad.decide("requests.get('http://x')", cwd=tmp_path).rule == "deny-network"
    named = _policy([{"id": "allow-api", "action": "allow", "any_of": ["network"], "lifts": ["deny-network"]}])
    v = named.decide("requests.get('http://x')", cwd=tmp_path)
    assert (v.action, v.rule, v.lifted) == ("allow", "allow-api", ("deny-network",))
    # lifting one deny does not lift another in the same cell
    v = named.decide("requests.get('http://x'); os.system('ls')", cwd=tmp_path)
    assert (v.action, v.rule) == ("deny", "deny-subprocess")


def test_session_scoped_rules_apply_only_to_their_session(tmp_path):
    rules = [{"id": "mine", "action": "allow", "only": ["rebinds"], "session": "s1"}]
    assert _policy(rules, session="s1").decide("x = 1", cwd=tmp_path).rule == "mine"
    assert _policy(rules, session="s2").decide("x = 1", cwd=tmp_path).action == "ask"


@pytest.mark.parametrize(("rule", "message"), [
    ({"id": "r", "action": "allow"}, "a rule needs any_of, only or code"),
    ({"id": "r", "action": "maybe", "only": ["read_only"]}, "approval.rules.0.action: expected"),
    ({"id": "r", "action": "allow", "only": ["readonly"]}, "approval.rules.0.only.0: expected"),
    ({"id": "r", "action": "allow", "code": "("}, "not a regular expression"),
    ({"id": "deny-network", "action": "allow", "only": ["network"]}, "built-in rule's id"),
    ({"id": "r", "action": "allow", "only": ["network"], "lifts": ["deny-everything"]}, "approval.rules.0.lifts.0"),
])
def test_bad_rules_are_one_clear_error_naming_the_field(rule, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Config.from_dict({"approval": {"rules": [rule]}})


def test_rule_ids_are_unique():
    rule = {"id": "twice", "action": "ask", "only": ["rebinds"]}
    with pytest.raises(ConfigError, match="two rules have the id twice"):
        Config.from_dict({"approval": {"rules": [rule, rule]}})


def test_every_built_in_deny_has_a_class_the_classifier_produces(tmp_path):
    produced = set()
    for code in corpus("adversarial"):
        produced |= classify(code, tmp_path).classes
    for rule in BUILTIN_DENIES:
        assert rule.any_of and rule.any_of <= produced, rule.id


# --- the corpus ----------------------------------------------------------------------------------------

def test_corpus_default_rules_allow_most_read_only_cells_and_no_adversarial_one(tmp_path):
    readonly, adversarial = corpus("readonly"), corpus("adversarial")
    assert len(readonly) >= 100 and len(adversarial) >= 200
    assert len(set(adversarial)) == len(adversarial) and len(set(readonly)) == len(readonly)
    policy = ApprovalPolicy()
    allowed = [c for c in readonly if policy.decide(c, cwd=tmp_path).action == "allow"]
    assert len(allowed) / len(readonly) >= 0.8, sorted(set(readonly) - set(allowed))
    escaped = [c for c in adversarial if policy.decide(c, cwd=tmp_path).action == "allow"]
    assert escaped == []
