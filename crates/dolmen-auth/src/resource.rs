//! Resources, actions and permissions (Druid's `Resource`, `Action`, `ResourceAction`,
//! `BasicAuthorizerPermission`).

use serde::{Deserialize, Serialize};

use crate::AuthError;

/// The kind of thing a permission is about (Druid's `ResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    /// A datasource (table); the name is the datasource's.
    #[serde(rename = "DATASOURCE")]
    Datasource,
    /// A view (none exist in Dolmen yet; accepted so Druid's role documents load).
    #[serde(rename = "VIEW")]
    View,
    /// Cluster configuration; names `CONFIG` (dynamic config, compaction config) and
    /// `security` (the user/role API).
    #[serde(rename = "CONFIG")]
    Config,
    /// Cluster state; the name is `STATE`.
    #[serde(rename = "STATE")]
    State,
    /// A system table (checked only when Druid's `authorizeSystemTablesDirectly` is on).
    #[serde(rename = "SYSTEM_TABLE")]
    SystemTable,
    /// Query context keys.
    #[serde(rename = "QUERY_CONTEXT")]
    QueryContext,
    /// External data (`EXTERN`); the name is `EXTERNAL`.
    #[serde(rename = "EXTERNAL")]
    External,
}

impl ResourceType {
    /// Every type, as the initial `admin` role holds them (Druid registers these seven).
    pub const ALL: [ResourceType; 7] = [
        ResourceType::Datasource,
        ResourceType::View,
        ResourceType::Config,
        ResourceType::State,
        ResourceType::SystemTable,
        ResourceType::QueryContext,
        ResourceType::External,
    ];
}

/// `READ` or `WRITE`; WRITE does not imply READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// Read (GET and HEAD requests).
    #[serde(rename = "READ")]
    Read,
    /// Write (every other method).
    #[serde(rename = "WRITE")]
    Write,
}

impl Action {
    /// The action an HTTP method needs (Druid's `AbstractResourceFilter`): GET and HEAD read,
    /// anything else writes.
    pub fn for_method(method: &str) -> Action {
        if method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD") {
            Action::Read
        } else {
            Action::Write
        }
    }
}

/// A named resource of a type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resource {
    /// The name (a regular expression inside a permission).
    pub name: String,
    /// The type.
    #[serde(rename = "type")]
    pub resource_type: ResourceType,
}

impl Resource {
    /// A datasource.
    pub fn datasource(name: impl Into<String>) -> Resource {
        Resource {
            name: name.into(),
            resource_type: ResourceType::Datasource,
        }
    }

    /// The cluster state (`STATE` named `STATE`).
    pub fn state() -> Resource {
        Resource {
            name: "STATE".into(),
            resource_type: ResourceType::State,
        }
    }

    /// Cluster configuration (`CONFIG` named `CONFIG`).
    pub fn config() -> Resource {
        Resource {
            name: "CONFIG".into(),
            resource_type: ResourceType::Config,
        }
    }

    /// The security API (`CONFIG` named `security`).
    pub fn security() -> Resource {
        Resource {
            name: "security".into(),
            resource_type: ResourceType::Config,
        }
    }

    /// A table of the `sys` schema, by its name (`segments`, `tasks`, ...): Druid's
    /// `SYSTEM_TABLE` resource, checked only when `authorizeSystemTablesDirectly` is on.
    pub fn system_table(name: impl Into<String>) -> Resource {
        Resource {
            name: name.into(),
            resource_type: ResourceType::SystemTable,
        }
    }

    /// External data read by `EXTERN` (`EXTERNAL` named `EXTERNAL`).
    pub fn external() -> Resource {
        Resource {
            name: "EXTERNAL".into(),
            resource_type: ResourceType::External,
        }
    }
}

/// A resource and an action: what a request needs, and what a permission grants.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceAction {
    /// The resource.
    pub resource: Resource,
    /// The action.
    pub action: Action,
}

impl ResourceAction {
    /// `resource` with `action`.
    pub fn new(resource: Resource, action: Action) -> ResourceAction {
        ResourceAction { resource, action }
    }
}

/// A permission held by a role: a [`ResourceAction`] whose name is a regular expression that
/// must match the whole resource name (Druid compiles it with `Pattern.compile` and calls
/// `matches()`).
#[derive(Debug, Clone)]
pub struct Permission {
    /// As stored and shown.
    pub resource_action: ResourceAction,
    pattern: regex::Regex,
}

impl Permission {
    /// Compiles a permission.
    ///
    /// # Errors
    /// [`AuthError::BadRequest`] when the name is not a valid regular expression.
    pub fn new(resource_action: ResourceAction) -> Result<Permission, AuthError> {
        let name = &resource_action.resource.name;
        let pattern = regex::Regex::new(&format!("^(?:{name})$")).map_err(|e| {
            AuthError::BadRequest(format!(
                "Invalid permission: resource.name [{name}] is not a valid regular expression: {e}"
            ))
        })?;
        Ok(Permission {
            resource_action,
            pattern,
        })
    }

    /// Whether this permission grants `wanted`: same type and action, and the name pattern
    /// matches the whole resource name.
    pub fn grants(&self, wanted: &ResourceAction) -> bool {
        self.resource_action.action == wanted.action
            && self.resource_action.resource.resource_type == wanted.resource.resource_type
            && self.pattern.is_match(&wanted.resource.name)
    }
}

/// Parses a permissions body (`[{resource{name,type},action}]`, the role permissions API).
///
/// # Errors
/// [`AuthError::BadRequest`] naming the element and field that does not parse, or a name that is
/// not a regular expression.
pub fn parse_permissions(
    body: &serde_json::Value,
) -> Result<(Vec<ResourceAction>, Vec<Permission>), AuthError> {
    let list: Vec<ResourceAction> = serde_path_to_error_lite(body)?;
    let compiled = list
        .iter()
        .cloned()
        .map(Permission::new)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((list, compiled))
}

fn serde_path_to_error_lite(body: &serde_json::Value) -> Result<Vec<ResourceAction>, AuthError> {
    let Some(items) = body.as_array() else {
        return Err(AuthError::BadRequest(
            "Invalid permissions: the body must be a JSON array of {resource{name,type},action}"
                .into(),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::from_value::<ResourceAction>(item.clone()).map_err(|e| {
                AuthError::BadRequest(format!("Invalid permissions: element [{i}]: {e}"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_match_whole_and_write_is_not_read() {
        let p = Permission::new(ResourceAction::new(
            Resource::datasource("wiki.*"),
            Action::Read,
        ))
        .unwrap();
        assert!(p.grants(&ResourceAction::new(
            Resource::datasource("wikipedia"),
            Action::Read
        )));
        // Anchored: a match inside the name is not enough.
        assert!(!p.grants(&ResourceAction::new(
            Resource::datasource("my_wikipedia"),
            Action::Read
        )));
        assert!(!p.grants(&ResourceAction::new(
            Resource::datasource("wikipedia"),
            Action::Write
        )));
        // An alternation is anchored as a whole.
        let p = Permission::new(ResourceAction::new(
            Resource::datasource("a|b"),
            Action::Read,
        ))
        .unwrap();
        assert!(!p.grants(&ResourceAction::new(
            Resource::datasource("ab"),
            Action::Read
        )));
        assert!(p.grants(&ResourceAction::new(
            Resource::datasource("b"),
            Action::Read
        )));
    }

    #[test]
    fn permissions_body_errors_name_the_element() {
        let e = parse_permissions(
            &json!([{"resource": {"name": "x", "type": "TABLE"}, "action": "READ"}]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("element [0]"), "{e}");
        let e = parse_permissions(
            &json!([{"resource": {"name": "(", "type": "DATASOURCE"}, "action": "READ"}]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("resource.name [(]"), "{e}");
        assert!(parse_permissions(&json!({})).is_err());
        let (list, _) = parse_permissions(
            &json!([{"resource": {"name": "STATE", "type": "STATE"}, "action": "WRITE"}]),
        )
        .unwrap();
        assert_eq!(list[0].action, Action::Write);
    }
}
