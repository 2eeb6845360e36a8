//! The builtin tools, their risk levels and what each needs to be available.

use std::fmt;

/// How much harm a tool can do; decides whether a call needs a human's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// No side effects beyond the broker's own records.
    Safe,
    /// Reaches outside the machine (network, third parties): needs approval.
    External,
    /// Can destroy data: needs approval.
    Destructive,
}

impl Risk {
    /// The stored name (`safe`, `external`, `destructive`).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Safe => "safe",
            Risk::External => "external",
            Risk::Destructive => "destructive",
        }
    }

    /// Whether calls of this risk wait for a human decision.
    pub fn needs_approval(self) -> bool {
        !matches!(self, Risk::Safe)
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What must hold for a tool to be listed and callable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// Always satisfied.
    Always,
    /// An environment variable set to a non-empty value.
    EnvVar(&'static str),
    /// A non-empty value under this key in the store's `settings`.
    Config(&'static str),
    /// At least one of these.
    AnyOf(Vec<Requirement>),
    /// Every one of these.
    AllOf(Vec<Requirement>),
}

/// Where requirement values are looked up; injectable so availability is testable.
pub struct Lookup<'a> {
    /// Reads an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Reads a configuration value (a `settings` key).
    pub config: &'a dyn Fn(&str) -> Option<String>,
}

impl Requirement {
    /// `Ok(())` when satisfied, else the human-readable reasons it is not.
    pub fn check(&self, lookup: &Lookup<'_>) -> Result<(), Vec<String>> {
        let present = |v: Option<String>| v.is_some_and(|v| !v.trim().is_empty());
        match self {
            Requirement::Always => Ok(()),
            Requirement::EnvVar(name) => {
                if present((lookup.env)(name)) {
                    Ok(())
                } else {
                    Err(vec![format!("environment variable {name} is not set")])
                }
            }
            Requirement::Config(key) => {
                if present((lookup.config)(key)) {
                    Ok(())
                } else {
                    Err(vec![format!("setting `{key}` is not configured")])
                }
            }
            Requirement::AnyOf(options) => {
                let mut missing = Vec::new();
                for option in options {
                    match option.check(lookup) {
                        Ok(()) => return Ok(()),
                        Err(reasons) => missing.push(reasons.join(" and ")),
                    }
                }
                Err(vec![format!("needs one of: {}", missing.join("; or "))])
            }
            Requirement::AllOf(parts) => {
                let missing: Vec<String> = parts
                    .iter()
                    .filter_map(|part| part.check(lookup).err())
                    .flatten()
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(missing)
                }
            }
        }
    }
}

/// The environment variable holding the Tavily key that enables `web_search`.
pub const TAVILY_API_KEY_ENV: &str = "TAVILY_API_KEY";
/// The `settings` key that enables `web_search` when the environment variable is absent.
pub const TAVILY_API_KEY_SETTING: &str = "tools.tavily.api_key";

/// The builtin tool names.
pub const ECHO: &str = "echo";
/// See [`ECHO`].
pub const NOTE: &str = "note";
/// See [`ECHO`].
pub const WEB_SEARCH: &str = "web_search";
/// See [`ECHO`].
pub const DELETE_PATH: &str = "delete_path";

/// A registered tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The `tools/list` name.
    pub name: &'static str,
    /// The one-line description shown to models.
    pub description: &'static str,
    /// The risk level.
    pub risk: Risk,
    /// What must hold for it to be available.
    pub requires: Requirement,
}

/// The four builtins, in listing order.
pub fn builtins() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: ECHO,
            description: "Echo a message back.",
            risk: Risk::Safe,
            requires: Requirement::Always,
        },
        ToolSpec {
            name: NOTE,
            description: "Record a short note.",
            risk: Risk::Safe,
            requires: Requirement::Always,
        },
        ToolSpec {
            name: WEB_SEARCH,
            description: "Search the web (a human approves each search).",
            risk: Risk::External,
            requires: Requirement::AnyOf(vec![
                Requirement::EnvVar(TAVILY_API_KEY_ENV),
                Requirement::Config(TAVILY_API_KEY_SETTING),
            ]),
        },
        ToolSpec {
            name: DELETE_PATH,
            description: "Delete a path once a human approves (demo: deletes nothing).",
            risk: Risk::Destructive,
            requires: Requirement::Always,
        },
    ]
}

/// The builtin named `name`, if any.
pub fn builtin(name: &str) -> Option<ToolSpec> {
    builtins().into_iter().find(|spec| spec.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup_with<'a>(
        env: &'a dyn Fn(&str) -> Option<String>,
        config: &'a dyn Fn(&str) -> Option<String>,
    ) -> Lookup<'a> {
        Lookup { env, config }
    }

    #[test]
    fn web_search_needs_the_env_var_or_the_setting_and_says_so() {
        let spec = builtin(WEB_SEARCH).unwrap();
        let none = |_: &str| None;
        let err = spec.requires.check(&lookup_with(&none, &none)).unwrap_err();
        assert_eq!(
            err,
            vec![
                "needs one of: environment variable TAVILY_API_KEY is not set; or setting \
                 `tools.tavily.api_key` is not configured"
                    .to_string()
            ]
        );
        let env = |k: &str| (k == TAVILY_API_KEY_ENV).then(|| "tvly-x".to_string());
        assert!(spec.requires.check(&lookup_with(&env, &none)).is_ok());
        let config = |k: &str| (k == TAVILY_API_KEY_SETTING).then(|| "tvly-x".to_string());
        assert!(spec.requires.check(&lookup_with(&none, &config)).is_ok());
        let blank = |_: &str| Some("  ".to_string());
        assert!(spec.requires.check(&lookup_with(&blank, &none)).is_err());
    }

    #[test]
    fn all_of_lists_every_missing_part() {
        let req = Requirement::AllOf(vec![
            Requirement::EnvVar("A"),
            Requirement::Config("b"),
            Requirement::Always,
        ]);
        let none = |_: &str| None;
        assert_eq!(
            req.check(&lookup_with(&none, &none)).unwrap_err(),
            vec![
                "environment variable A is not set".to_string(),
                "setting `b` is not configured".to_string()
            ]
        );
        let env = |_: &str| Some("1".to_string());
        assert_eq!(
            req.check(&lookup_with(&env, &none)).unwrap_err(),
            vec!["setting `b` is not configured".to_string()]
        );
        let config = |_: &str| Some("1".to_string());
        assert!(req.check(&lookup_with(&env, &config)).is_ok());
    }

    #[test]
    fn builtins_have_their_risk_levels() {
        let risks: Vec<(&str, Risk)> = builtins().iter().map(|s| (s.name, s.risk)).collect();
        assert_eq!(
            risks,
            vec![
                (ECHO, Risk::Safe),
                (NOTE, Risk::Safe),
                (WEB_SEARCH, Risk::External),
                (DELETE_PATH, Risk::Destructive)
            ]
        );
    }
}
