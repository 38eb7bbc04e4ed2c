//! Security configuration from runtime properties (Druid's `druid.auth.*` and
//! `druid.escalator.*`, with the spec's `service.` prefix).
//!
//! | property | meaning | default |
//! |---|---|---|
//! | `service.auth.authenticatorChain` | JSON array of authenticator names, tried in order | unset: security off |
//! | `service.auth.authenticator.<name>.type` | `basic`, `anonymous` or `allowAll` | required |
//! | `service.auth.authenticator.<name>.authorizerName` | authorizer of the users it authenticates | required (`basic`, `anonymous`) |
//! | `service.auth.authenticator.<name>.credentialsValidator.type` | `metadata` (users in the metadata store) | `metadata` |
//! | `service.auth.authenticator.<name>.skipOnFailure` | unknown users go on to the next authenticator | `false` |
//! | `service.auth.authenticator.<name>.initialAdminPassword` | password of `admin`, set when the user is created | none (no `admin` login) |
//! | `service.auth.authenticator.<name>.initialInternalClientPassword` | password of `druid_system` | none |
//! | `service.auth.authenticator.<name>.credentialIterations` | PBKDF2 iterations of new credentials | 10000 |
//! | `service.auth.authenticator.<name>.identity` | `anonymous`: the identity given | `defaultUser` |
//! | `service.auth.authorizers` | JSON array of authorizer names | `["allowAll"]` |
//! | `service.auth.authorizer.<name>.type` | `basic` or `allowAll` | required |
//! | `service.auth.unsecuredPaths` | JSON array of extra paths served without authentication | `[]` |
//! | `service.escalator.type` | `basic` (or `noop`) | `noop` |
//! | `service.escalator.internalClientUsername` | internal user | `druid_system` |
//! | `service.escalator.internalClientPassword` | its password | required with `basic` |
//! | `service.escalator.authorizerName` | its authorizer | required with `basic` |
//!
//! Passwords accept Druid's password providers: a plain string, or a JSON object
//! `{"type":"environment","variable":"NAME"}` (read from the environment at start-up) or
//! `{"type":"default","password":"..."}`.
//!
//! Every misconfiguration is an error naming the property, so start-up stops.

use std::collections::BTreeMap;

use dolmen_common::config::{ConfigError, Properties};

/// The prefix of every security property.
pub const AUTH_PREFIX: &str = "service.auth";
/// The internal user's fixed name in every basic authenticator and authorizer (Druid's).
pub const INTERNAL_USER: &str = "druid_system";
/// The administrator's name.
pub const ADMIN_USER: &str = "admin";

/// A password as configured (Druid's `PasswordProvider`), resolved at start-up.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The password.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Resolves a password property: a plain string, or `{"type":"environment","variable":...}` /
/// `{"type":"default","password":...}`.
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming `key` for an unknown provider type, a missing field, or
/// an unset environment variable.
pub fn password_property(props: &Properties, key: &str) -> Result<Option<Secret>, ConfigError> {
    let Some(raw) = props.get(key) else {
        return Ok(None);
    };
    let invalid = |reason: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: "<redacted>".into(),
        reason,
    };
    let trimmed = raw.trim();
    if !trimmed.starts_with('{') {
        return Ok(Some(Secret(raw.to_string())));
    }
    let v: serde_json::Value = serde_json::from_str(trimmed)
        .map_err(|e| invalid(format!("not a password provider object: {e}")))?;
    let field = |name: &str| -> Result<String, ConfigError> {
        v.get(name)
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or_else(|| invalid(format!("password provider needs the string field [{name}]")))
    };
    match v.get("type").and_then(|t| t.as_str()) {
        Some("environment") => {
            let variable = field("variable")?;
            std::env::var(&variable)
                .map(|p| Some(Secret(p)))
                .map_err(|_| {
                    invalid(format!(
                        "environment variable [{variable}] of the password provider is not set"
                    ))
                })
        }
        Some("default") | None => field("password").map(|p| Some(Secret(p))),
        Some(other) => Err(invalid(format!(
            "unknown password provider type [{other}]: use \"environment\" or \"default\""
        ))),
    }
}

/// One authenticator of the chain.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthenticatorConfig {
    /// HTTP basic with users in the metadata store.
    Basic {
        /// Name (its users live under this name).
        name: String,
        /// Authorizer of its users.
        authorizer_name: String,
        /// Unknown users (or users without credentials) go on to the next authenticator.
        skip_on_failure: bool,
        /// Password of `admin`, set when the user is first created.
        initial_admin_password: Option<Secret>,
        /// Password of `druid_system`, set when the user is first created.
        initial_internal_client_password: Option<Secret>,
        /// PBKDF2 iterations of new credentials.
        credential_iterations: u32,
    },
    /// Authenticates every request that reaches it as a fixed identity.
    Anonymous {
        /// Name.
        name: String,
        /// The identity given.
        identity: String,
        /// Its authorizer.
        authorizer_name: String,
    },
    /// Authenticates every request as `allowAll` with the `allowAll` authorizer.
    AllowAll {
        /// Name.
        name: String,
    },
}

impl AuthenticatorConfig {
    /// The authenticator's name.
    pub fn name(&self) -> &str {
        match self {
            AuthenticatorConfig::Basic { name, .. }
            | AuthenticatorConfig::Anonymous { name, .. }
            | AuthenticatorConfig::AllowAll { name } => name,
        }
    }
}

/// One authorizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizerType {
    /// Roles and permissions in the metadata store.
    Basic,
    /// Allows everything.
    AllowAll,
}

/// The internal client's identity (Druid's escalator). Dolmen runs every role in one process,
/// so no internal HTTP call uses it yet; it is validated so that a cluster configuration is
/// checked at start-up.
#[derive(Debug, Clone, PartialEq)]
pub struct EscalatorConfig {
    /// Internal user name.
    pub internal_client_username: String,
    /// Its password.
    pub internal_client_password: Secret,
    /// Its authorizer.
    pub authorizer_name: String,
}

/// The whole security configuration; `None` from [`SecurityConfig::from_properties`] when
/// security is off (no authenticator chain).
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityConfig {
    /// Authenticators, in chain order.
    pub authenticators: Vec<AuthenticatorConfig>,
    /// Authorizers by name.
    pub authorizers: BTreeMap<String, AuthorizerType>,
    /// The escalator (`service.escalator.type=basic`).
    pub escalator: Option<EscalatorConfig>,
    /// Extra paths served without authentication (`service.auth.unsecuredPaths`).
    pub unsecured_paths: Vec<String>,
    /// `service.sql.planner.authorizeSystemTablesDirectly` (Druid's
    /// `druid.sql.planner.authorizeSystemTablesDirectly`, default false): a query reading a
    /// `sys` table also needs `SYSTEM_TABLE` READ on the table's name.
    pub authorize_system_tables_directly: bool,
}

/// The property of [`SecurityConfig::authorize_system_tables_directly`].
pub const AUTHORIZE_SYSTEM_TABLES_DIRECTLY: &str =
    "service.sql.planner.authorizeSystemTablesDirectly";

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn name_list(props: &Properties, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(raw) = props.get(key) else {
        return Ok(None);
    };
    serde_json::from_str::<Vec<String>>(raw.trim())
        .map(Some)
        .map_err(|e| invalid(key, raw, format!("expected a JSON array of names: {e}")))
}

fn required(props: &Properties, key: &str) -> Result<String, ConfigError> {
    match props.get(key).map(str::trim) {
        Some(v) if !v.is_empty() => Ok(v.to_string()),
        _ => Err(invalid(key, "", "required property is missing")),
    }
}

impl SecurityConfig {
    /// Reads the security properties; `Ok(None)` when `service.auth.authenticatorChain` is
    /// unset (security off, Druid's default `allowAll` chain).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the property: a chain naming an undefined
    /// authenticator, an unknown type, a missing or undefined `authorizerName`, a
    /// `credentialsValidator.type` other than `metadata`, a bad password provider.
    pub fn from_properties(props: &Properties) -> Result<Option<SecurityConfig>, ConfigError> {
        let chain_key = "service.auth.authenticatorChain";
        let Some(chain) = name_list(props, chain_key)? else {
            return Ok(None);
        };
        if chain.is_empty() {
            return Err(invalid(
                chain_key,
                "[]",
                "the authenticator chain needs at least one authenticator",
            ));
        }
        let authorizers_key = "service.auth.authorizers";
        let authorizer_names =
            name_list(props, authorizers_key)?.unwrap_or_else(|| vec!["allowAll".to_string()]);
        let mut authorizers = BTreeMap::new();
        for name in &authorizer_names {
            let key = format!("{AUTH_PREFIX}.authorizer.{name}.type");
            let t = match props.get(&key).map(str::trim) {
                Some("basic") => AuthorizerType::Basic,
                Some("allowAll") => AuthorizerType::AllowAll,
                None if name == "allowAll" => AuthorizerType::AllowAll,
                Some(other) => {
                    return Err(invalid(
                        &key,
                        other,
                        "unknown authorizer type: use \"basic\" or \"allowAll\"",
                    ));
                }
                None => {
                    return Err(invalid(
                        &key,
                        "",
                        format!("authorizer [{name}] listed in {authorizers_key} has no type"),
                    ));
                }
            };
            authorizers.insert(name.clone(), t);
        }
        let authorizer_ref = |key: &str| -> Result<String, ConfigError> {
            let name = required(props, key)?;
            if authorizers.contains_key(&name) {
                Ok(name)
            } else {
                Err(invalid(
                    key,
                    &name,
                    format!(
                        "no authorizer of that name: {authorizers_key} lists {authorizer_names:?}"
                    ),
                ))
            }
        };
        let mut authenticators = Vec::new();
        for name in &chain {
            let p = |field: &str| format!("{AUTH_PREFIX}.authenticator.{name}.{field}");
            let type_key = p("type");
            let config = match props.get(&type_key).map(str::trim) {
                Some("basic") => {
                    let validator_key = p("credentialsValidator.type");
                    match props.get(&validator_key).map(str::trim) {
                        None | Some("metadata") => {}
                        Some(other) => {
                            return Err(invalid(
                                &validator_key,
                                other,
                                "only \"metadata\" (users in the metadata store) is supported",
                            ));
                        }
                    }
                    AuthenticatorConfig::Basic {
                        name: name.clone(),
                        authorizer_name: authorizer_ref(&p("authorizerName"))?,
                        skip_on_failure: props
                            .get_parsed::<bool>(&p("skipOnFailure"))?
                            .unwrap_or(false),
                        initial_admin_password: password_property(
                            props,
                            &p("initialAdminPassword"),
                        )?,
                        initial_internal_client_password: password_property(
                            props,
                            &p("initialInternalClientPassword"),
                        )?,
                        credential_iterations: match props
                            .get_parsed::<u32>(&p("credentialIterations"))?
                        {
                            Some(0) => {
                                return Err(invalid(
                                    &p("credentialIterations"),
                                    "0",
                                    "must be a positive integer",
                                ));
                            }
                            Some(n) => n,
                            None => crate::hash::DEFAULT_ITERATIONS,
                        },
                    }
                }
                Some("anonymous") => AuthenticatorConfig::Anonymous {
                    name: name.clone(),
                    identity: props
                        .get(&p("identity"))
                        .unwrap_or("defaultUser")
                        .to_string(),
                    authorizer_name: authorizer_ref(&p("authorizerName"))?,
                },
                Some("allowAll") => AuthenticatorConfig::AllowAll { name: name.clone() },
                None if name == "allowAll" => AuthenticatorConfig::AllowAll { name: name.clone() },
                Some(other) => {
                    return Err(invalid(
                        &type_key,
                        other,
                        "unknown authenticator type: use \"basic\", \"anonymous\" or \"allowAll\"",
                    ));
                }
                None => {
                    return Err(invalid(
                        &type_key,
                        "",
                        format!("authenticator [{name}] named in {chain_key} is not defined"),
                    ));
                }
            };
            authenticators.push(config);
        }
        let escalator = match props.get("service.escalator.type").map(str::trim) {
            None | Some("noop") => None,
            Some("basic") => Some(EscalatorConfig {
                internal_client_username: props
                    .get("service.escalator.internalClientUsername")
                    .unwrap_or(INTERNAL_USER)
                    .to_string(),
                internal_client_password: password_property(
                    props,
                    "service.escalator.internalClientPassword",
                )?
                .ok_or_else(|| {
                    invalid(
                        "service.escalator.internalClientPassword",
                        "",
                        "required with service.escalator.type=basic",
                    )
                })?,
                authorizer_name: authorizer_ref("service.escalator.authorizerName")?,
            }),
            Some(other) => {
                return Err(invalid(
                    "service.escalator.type",
                    other,
                    "unknown escalator type: use \"basic\" or \"noop\"",
                ));
            }
        };
        let unsecured_paths = name_list(props, "service.auth.unsecuredPaths")?.unwrap_or_default();
        let authorize_system_tables_directly = props
            .get_parsed::<bool>(AUTHORIZE_SYSTEM_TABLES_DIRECTLY)?
            .unwrap_or(false);
        Ok(Some(SecurityConfig {
            authenticators,
            authorizers,
            escalator,
            unsecured_paths,
            authorize_system_tables_directly,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Properties {
        Properties::parse(text)
    }

    const BASIC: &str = r#"
service.auth.authenticatorChain=["MyBasicMetadataAuthenticator"]
service.auth.authenticator.MyBasicMetadataAuthenticator.type=basic
service.auth.authenticator.MyBasicMetadataAuthenticator.initialAdminPassword=password1
service.auth.authenticator.MyBasicMetadataAuthenticator.initialInternalClientPassword={"type":"environment","variable":"DOLMEN_AUTH_TEST_INTERNAL"}
service.auth.authenticator.MyBasicMetadataAuthenticator.credentialsValidator.type=metadata
service.auth.authenticator.MyBasicMetadataAuthenticator.skipOnFailure=false
service.auth.authenticator.MyBasicMetadataAuthenticator.authorizerName=MyBasicMetadataAuthorizer
service.escalator.type=basic
service.escalator.internalClientUsername=druid_system
service.escalator.internalClientPassword={"type":"default","password":"p2"}
service.escalator.authorizerName=MyBasicMetadataAuthorizer
service.auth.authorizers=["MyBasicMetadataAuthorizer"]
service.auth.authorizer.MyBasicMetadataAuthorizer.type=basic
"#;

    #[test]
    fn off_by_default() {
        assert_eq!(SecurityConfig::from_properties(&props("")).unwrap(), None);
    }

    #[test]
    fn druid_basic_setup_with_password_providers() {
        // SAFETY: both tests that read this variable set it to the same value.
        unsafe { std::env::set_var("DOLMEN_AUTH_TEST_INTERNAL", "from-env") };
        let c = SecurityConfig::from_properties(&props(BASIC))
            .unwrap()
            .unwrap();
        let AuthenticatorConfig::Basic {
            initial_admin_password,
            initial_internal_client_password,
            credential_iterations,
            ..
        } = &c.authenticators[0]
        else {
            panic!("basic expected")
        };
        assert_eq!(
            initial_admin_password.as_ref().unwrap().expose(),
            "password1"
        );
        assert_eq!(
            initial_internal_client_password.as_ref().unwrap().expose(),
            "from-env"
        );
        assert_eq!(*credential_iterations, 10000);
        assert_eq!(c.escalator.unwrap().internal_client_password.expose(), "p2");
        assert_eq!(
            c.authorizers["MyBasicMetadataAuthorizer"],
            AuthorizerType::Basic
        );
        // Secrets never print.
        assert!(!format!("{initial_admin_password:?}").contains("password1"));
        assert!(!c.authorize_system_tables_directly);
        let direct = format!("{BASIC}{AUTHORIZE_SYSTEM_TABLES_DIRECTLY}=true\n");
        let c = SecurityConfig::from_properties(&props(&direct))
            .unwrap()
            .unwrap();
        assert!(c.authorize_system_tables_directly);
        let e = error_of(&format!(
            "{BASIC}{AUTHORIZE_SYSTEM_TABLES_DIRECTLY}=maybe\n"
        ));
        assert!(e.contains(AUTHORIZE_SYSTEM_TABLES_DIRECTLY), "{e}");
    }

    fn error_of(text: &str) -> String {
        SecurityConfig::from_properties(&props(text))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn misconfiguration_names_the_property() {
        // SAFETY: both tests that read this variable set it to the same value.
        unsafe { std::env::set_var("DOLMEN_AUTH_TEST_INTERNAL", "from-env") };
        let e = error_of(r#"service.auth.authenticatorChain=["a"]"#);
        assert!(e.contains("service.auth.authenticator.a.type"), "{e}");
        let e = error_of(&BASIC.replace(
            "service.auth.authorizers=[\"MyBasicMetadataAuthorizer\"]",
            "service.auth.authorizers=[\"other\"]\nservice.auth.authorizer.other.type=basic",
        ));
        assert!(
            e.contains("service.auth.authenticator.MyBasicMetadataAuthenticator.authorizerName"),
            "{e}"
        );
        let e = error_of(&BASIC.replace("Validator.type=metadata", "Validator.type=ldap"));
        assert!(e.contains("credentialsValidator.type"), "{e}");
        let e = error_of(&BASIC.replace("DOLMEN_AUTH_TEST_INTERNAL", "DOLMEN_AUTH_TEST_UNSET_VAR"));
        assert!(e.contains("initialInternalClientPassword"), "{e}");
        assert!(e.contains("DOLMEN_AUTH_TEST_UNSET_VAR"), "{e}");
        let e = error_of(r#"service.auth.authenticatorChain=MyBasic"#);
        assert!(e.contains("service.auth.authenticatorChain"), "{e}");
        let e = error_of(&BASIC.replace(
            "service.auth.authorizer.MyBasicMetadataAuthorizer.type=basic",
            "",
        ));
        assert!(
            e.contains("service.auth.authorizer.MyBasicMetadataAuthorizer.type"),
            "{e}"
        );
        let e = error_of(&BASIC.replace(
            "service.escalator.authorizerName=MyBasicMetadataAuthorizer",
            "",
        ));
        assert!(e.contains("service.escalator.authorizerName"), "{e}");
    }
}
