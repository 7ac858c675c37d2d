//! A small IAM policy evaluator: identity-based policies with `Allow` and
//! `Deny` statements, `Action` and `Resource` with `*`/`?` wildcards, and
//! the condition operators the documented policy uses (`StringEquals`,
//! `StringLike`, their `Not` forms, each also under `ForAllValues:` and
//! `ForAnyValue:`). The rules follow the IAM policy evaluation logic and
//! condition-operator reference in the IAM User Guide
//! (`reference_policies_evaluation-logic`, `reference_policies_elements_condition_operators`,
//! `reference_policies_condition-single-vs-multi-valued-context-keys`):
//! an explicit deny wins, then an allow, else the implicit deny; actions
//! and condition keys compare case-insensitively, resources case-sensitively;
//! a condition block holds when every operator and key in it holds; a
//! single-valued operator on a key absent from the request is false, a
//! `ForAllValues` one is true and a `ForAnyValue` one false. An operator
//! it does not know fails the evaluation, so a policy can never be
//! judged on rules the evaluator skipped.

use std::collections::BTreeMap;

use serde_json::Value;

/// One authorization the cloud makes: action, resource ARN and the
/// request's condition keys (lower-cased) with their values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// e.g. `ec2:RunInstances`.
    pub action: String,
    /// e.g. `arn:aws:ec2:us-east-1:123456789012:instance/*`.
    pub resource: String,
    /// Condition keys, lower-cased, e.g. `aws:requesttag/muster.dev/cluster`.
    pub context: BTreeMap<String, Vec<String>>,
}

impl Request {
    /// A request without condition keys.
    pub fn new(action: &str, resource: &str) -> Request {
        Request {
            action: action.into(),
            resource: resource.into(),
            context: BTreeMap::new(),
        }
    }

    /// Adds a condition key.
    pub fn with(mut self, key: &str, values: Vec<String>) -> Request {
        self.context.insert(key.to_ascii_lowercase(), values);
        self
    }
}

/// What the policy says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// An `Allow` statement matched and no `Deny` did.
    Allow,
    /// No statement matched.
    ImplicitDeny,
    /// A `Deny` statement matched (its `Sid`).
    ExplicitDeny(String),
}

/// `*` matches any run of characters, `?` exactly one.
pub fn wildcard(pattern: &str, text: &str, case_insensitive: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = if case_insensitive {
        (
            pattern.to_lowercase().chars().collect(),
            text.to_lowercase().chars().collect(),
        )
    } else {
        (pattern.chars().collect(), text.chars().collect())
    };
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        Value::Bool(b) => vec![b.to_string()],
        _ => Vec::new(),
    }
}

/// Whether one value satisfies the base operator against any policy value.
fn compare(op: &str, policy: &[String], value: &str) -> Result<bool, String> {
    Ok(match op {
        "stringequals" => policy.iter().any(|p| p == value),
        "stringnotequals" => !policy.iter().any(|p| p == value),
        "stringequalsignorecase" => policy.iter().any(|p| p.eq_ignore_ascii_case(value)),
        "stringlike" => policy.iter().any(|p| wildcard(p, value, false)),
        "stringnotlike" => !policy.iter().any(|p| wildcard(p, value, false)),
        // Bool compares "true"/"false", case-insensitively
        "bool" => policy.iter().any(|p| p.eq_ignore_ascii_case(value)),
        other => return Err(format!("condition operator {other} is not modelled")),
    })
}

fn condition_holds(
    operator: &str,
    key: &str,
    policy: &[String],
    context: &BTreeMap<String, Vec<String>>,
) -> Result<bool, String> {
    let lower = operator.to_ascii_lowercase();
    let (set, base) = match lower.split_once(':') {
        Some((set, base)) => (Some(set.to_string()), base.to_string()),
        None => (None, lower.clone()),
    };
    if base.ends_with("ifexists") {
        return Err(format!("condition operator {operator} is not modelled"));
    }
    // an unknown operator fails whether or not the key is present
    compare(&base, &[], "")?;
    let values = context.get(&key.to_ascii_lowercase());
    match set.as_deref() {
        None => match values {
            // a single-valued operator on an absent key does not match
            None => Ok(false),
            Some(vs) => {
                let mut any = false;
                for v in vs {
                    any |= compare(&base, policy, v)?;
                }
                Ok(any)
            }
        },
        Some("forallvalues") => {
            let mut all = true;
            for v in values.into_iter().flatten() {
                all &= compare(&base, policy, v)?;
            }
            Ok(all)
        }
        Some("foranyvalue") => {
            let mut any = false;
            for v in values.into_iter().flatten() {
                any |= compare(&base, policy, v)?;
            }
            Ok(any)
        }
        Some(other) => Err(format!("set operator {other} is not modelled")),
    }
}

fn statement_matches(st: &Value, req: &Request) -> Result<bool, String> {
    for unsupported in ["NotAction", "NotResource", "Principal", "NotPrincipal"] {
        if st.get(unsupported).is_some() {
            return Err(format!("{unsupported} is not modelled"));
        }
    }
    let actions = strings(st.get("Action").unwrap_or(&Value::Null));
    if !actions.iter().any(|a| wildcard(a, &req.action, true)) {
        return Ok(false);
    }
    let resources = strings(st.get("Resource").unwrap_or(&Value::Null));
    if !resources.iter().any(|r| wildcard(r, &req.resource, false)) {
        return Ok(false);
    }
    if let Some(cond) = st.get("Condition").and_then(Value::as_object) {
        for (operator, keys) in cond {
            let keys = keys
                .as_object()
                .ok_or_else(|| format!("condition {operator} is not an object"))?;
            for (key, policy) in keys {
                if !condition_holds(operator, key, &strings(policy), &req.context)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Evaluates a policy document against one request.
pub fn evaluate(policy: &Value, req: &Request) -> Result<Decision, String> {
    let statements = match policy.get("Statement") {
        Some(Value::Array(a)) => a.clone(),
        Some(one @ Value::Object(_)) => vec![one.clone()],
        _ => return Err("the policy has no Statement".into()),
    };
    let mut allowed = false;
    for st in &statements {
        if !statement_matches(st, req)? {
            continue;
        }
        match st.get("Effect").and_then(Value::as_str) {
            Some("Deny") => {
                let sid = st
                    .get("Sid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                return Ok(Decision::ExplicitDeny(sid));
            }
            Some("Allow") => allowed = true,
            other => return Err(format!("Effect {other:?} is not Allow or Deny")),
        }
    }
    Ok(if allowed {
        Decision::Allow
    } else {
        Decision::ImplicitDeny
    })
}
