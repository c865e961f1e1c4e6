"""Safe Python in the live kernel: classify a cell from its AST, then let ordered rules decide the obvious cases.

    policy = ApprovalPolicy.from_config(ws.config.approval, session_id=run_session)
    verdict = policy.decide("df.head()")       # Verdict(action="allow", rule="allow-read-only", ...)
    classify("import os; os.system('ls')").classes   # {"imports", "subprocess"}

The engine's python tool asks the policy before it asks a person (``engine/tools.py``): ``allow`` runs
the code, ``deny`` refuses it naming the rule, ``ask`` opens the usual decision; every decision records
whether a rule (its id) or a person decided. An approval answered ``always`` saves a rule
(:mod:`.saved`) that later calls of the session or workspace are decided by.

Services layer: imports only the foundation (config).
"""

from agentstack_lab.approval.classify import Classification, Finding, classify
from agentstack_lab.approval.rules import BUILTIN_DENIES, DEFAULT_RULES, ApprovalPolicy, Rule, Verdict
from agentstack_lab.approval.saved import SCOPES, AlwaysRule, SavedRule, SavedRules, always_rule

__all__ = ["classify", "Classification", "Finding", "ApprovalPolicy", "Rule", "Verdict", "BUILTIN_DENIES",
           "DEFAULT_RULES", "always_rule", "AlwaysRule", "SavedRule", "SavedRules", "SCOPES"]
