//! The CEL rules (`x-kubernetes-validations`) of the Cluster API 1.12 and capd-rs CRDs, evaluated
//! natively. This is not a CEL interpreter: it recognises the rule texts these CRDs use and says
//! `None` for any other, so a new rule shows up as a problem instead of passing unchecked.

use serde_json::Value;

/// `Some(true)` when `value` satisfies `rule`, `Some(false)` when it does not, `None` when the rule
/// is not one this module knows.
pub fn evaluate(rule: &str, value: &Value) -> Option<bool> {
    let rule = rule.trim();
    if rule == "self.all(x, self.exists_one(y, x.name == y.name))" {
        // extraArgs / kubeletExtraArgs: every name once.
        let items = value.as_array()?;
        let names: Vec<&Value> = items.iter().filter_map(|i| i.get("name")).collect();
        let unique = names
            .iter()
            .all(|n| names.iter().filter(|m| *m == n).count() == 1);
        return Some(unique);
    }
    if let Some(list) = rule
        .strip_prefix("!(self in [")
        .and_then(|r| r.strip_suffix("])"))
    {
        // Condition types reserved by Cluster API.
        let forbidden: Vec<&str> = list
            .split(',')
            .map(|s| s.trim().trim_matches('\''))
            .collect();
        return Some(!forbidden.contains(&value.as_str()?));
    }
    if rule.starts_with("self.contains('/') ? ( self.split('/') [0].size() <= 253")
        && rule.ends_with(": self.size() <= 63")
    {
        // Label/annotation keys of Cluster API metadata: [prefix/]name with length limits.
        return Some(key_lengths(value.as_str()?));
    }
    None
}

fn key_lengths(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => prefix.len() <= 253 && name.len() <= 63 && !name.contains('/'),
        None => key.len() <= 63,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rules_of_the_cluster_api_crds() {
        let unique = "self.all(x, self.exists_one(y, x.name == y.name))";
        let args = json!([{"name": "a", "value": "1"}, {"name": "b", "value": "1"}]);
        assert_eq!(evaluate(unique, &args), Some(true));
        let twice = json!([{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]);
        assert_eq!(evaluate(unique, &twice), Some(false));

        let reserved = "!(self in ['Ready','Available','HealthCheckSucceeded'])";
        assert_eq!(evaluate(reserved, &json!("NodeReady")), Some(true));
        assert_eq!(evaluate(reserved, &json!("Ready")), Some(false));

        let key = "self.contains('/') ? ( self.split('/') [0].size() <= 253 && self.split('/') [1].size() <= 63 && self.split('/').size() == 2 ) : self.size() <= 63";
        assert_eq!(evaluate(key, &json!("example.com/role")), Some(true));
        assert_eq!(evaluate(key, &json!("x".repeat(64))), Some(false));
        assert_eq!(evaluate(key, &json!("a/b/c")), Some(false));

        assert_eq!(evaluate("self.size() > 1", &json!("ab")), None);
    }
}
