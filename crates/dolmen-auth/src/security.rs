//! The running security: the authenticator chain, the authorizers, their caches over the
//! metadata store, and the user/role API's operations.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use dolmen_metadata::{AuthzSnapshot, MetadataStore};
use ring::rand::SecureRandom;
use serde_json::{Value, json};

use crate::AuthError;
use crate::config::{
    ADMIN_USER, AuthenticatorConfig, AuthorizerType, INTERNAL_USER, SecurityConfig,
};
use crate::hash::{Credentials, constant_time_eq, decode_basic};
use crate::resource::{Action, Permission, ResourceAction, ResourceType};

/// Who a request is, once authenticated (Druid's `AuthenticationResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name (`allowAll` under an `allowAll` authenticator).
    pub name: String,
    /// The authorizer that decides for this user.
    pub authorizer: String,
    /// The authenticator that accepted the request.
    pub authenticated_by: String,
}

/// What one identity may do ([`Security::grants`]), checked without awaiting.
#[derive(Debug, Clone)]
pub enum Grants {
    /// An `allowAll` authorizer: everything.
    All,
    /// The permissions of the user's roles (none for an unknown user).
    Some(Vec<Permission>),
}

impl Grants {
    /// Whether these grants allow `wanted` (as [`Security::authorize`] decides).
    pub fn allows(&self, wanted: &ResourceAction) -> bool {
        match self {
            Grants::All => true,
            Grants::Some(perms) => perms.iter().any(|p| p.grants(wanted)),
        }
    }
}

/// The result of running the chain on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthnOutcome {
    /// An authenticator accepted the request.
    Authenticated(Identity),
    /// Credentials were given and are wrong (known user, wrong password; unknown user without
    /// `skipOnFailure`; an undecodable header): 401 at once.
    Rejected(String),
    /// Nobody authenticated the request (no credentials, or every authenticator skipped): 401
    /// with `WWW-Authenticate`.
    Unauthenticated,
}

/// Users of one basic authenticator as cached: name to credentials.
type UserMap = HashMap<String, Option<Credentials>>;

#[derive(Debug)]
struct BasicAuthenticator {
    name: String,
    authorizer: String,
    skip_on_failure: bool,
    iterations: u32,
    users: RwLock<Option<Arc<UserMap>>>,
    /// SHA-256(process salt, user, password) of recently validated logins, to the stored hash
    /// they matched: a changed password (a different stored hash) misses.
    validated: Mutex<HashMap<[u8; 32], Vec<u8>>>,
}

/// Most validated logins kept per authenticator before the cache is emptied.
const VALIDATED_CACHE_MAX: usize = 10_000;

#[derive(Debug)]
enum Authenticator {
    Basic(BasicAuthenticator),
    Anonymous { identity: Identity },
    AllowAll { name: String },
}

#[derive(Debug, Default)]
struct AuthzCache {
    snapshot: AuthzSnapshot,
    users: HashMap<String, Vec<String>>,
    roles: HashMap<String, Vec<Permission>>,
}

#[derive(Debug)]
enum Authorizer {
    Basic {
        cache: RwLock<Option<Arc<AuthzCache>>>,
    },
    AllowAll,
}

/// The running chain and authorizers (one per process, shared by every request).
#[derive(Debug)]
pub struct Security {
    chain: Vec<Authenticator>,
    authorizers: BTreeMap<String, Authorizer>,
    unsecured_paths: Vec<String>,
    authorize_system_tables_directly: bool,
    metadata: Arc<dyn MetadataStore>,
    process_salt: [u8; 16],
}

/// The 14 permissions of Druid's initial `admin` and `druid_system` roles: READ and WRITE on
/// `.*` of every resource type.
fn full_permissions() -> Value {
    let mut list = Vec::new();
    for t in ResourceType::ALL {
        for a in [Action::Read, Action::Write] {
            list.push(json!({"resource": {"name": ".*", "type": t}, "action": a}));
        }
    }
    Value::Array(list)
}

fn ignore_exists(r: Result<(), dolmen_metadata::MetadataError>) -> Result<bool, AuthError> {
    match r {
        Ok(()) => Ok(true),
        Err(dolmen_metadata::MetadataError::Conflict(_)) => Ok(false),
        Err(e) => Err(AuthError::Metadata(e)),
    }
}

impl Security {
    /// Builds the chain and authorizers and creates the initial state in the metadata store
    /// (Druid's): in every basic authorizer the roles `admin` and `druid_system` with every
    /// permission and the users of those names holding them; in every basic authenticator the
    /// users `admin` and `druid_system` with the configured initial passwords, when set and the
    /// user does not exist yet (an existing user keeps its password).
    ///
    /// # Errors
    /// When the metadata store fails.
    pub async fn start(
        config: &SecurityConfig,
        metadata: Arc<dyn MetadataStore>,
    ) -> Result<Arc<Security>, AuthError> {
        let mut authorizers = BTreeMap::new();
        for (name, t) in &config.authorizers {
            let a = match t {
                AuthorizerType::AllowAll => Authorizer::AllowAll,
                AuthorizerType::Basic => {
                    for who in [ADMIN_USER, INTERNAL_USER] {
                        ignore_exists(
                            metadata
                                .create_authz_role(name, who, &full_permissions())
                                .await,
                        )?;
                        if ignore_exists(metadata.create_authz_user(name, who).await)? {
                            ignore_exists(
                                metadata.set_authz_user_role(name, who, who, true).await,
                            )?;
                        }
                    }
                    Authorizer::Basic {
                        cache: RwLock::new(None),
                    }
                }
            };
            authorizers.insert(name.clone(), a);
        }
        let mut chain = Vec::new();
        for a in &config.authenticators {
            chain.push(match a {
                AuthenticatorConfig::Basic {
                    name,
                    authorizer_name,
                    skip_on_failure,
                    initial_admin_password,
                    initial_internal_client_password,
                    credential_iterations,
                } => {
                    for (who, password) in [
                        (ADMIN_USER, initial_admin_password),
                        (INTERNAL_USER, initial_internal_client_password),
                    ] {
                        let Some(password) = password else { continue };
                        if ignore_exists(metadata.create_authn_user(name, who).await)? {
                            let c = Credentials::generate(
                                password.expose(),
                                *credential_iterations,
                            )?;
                            metadata
                                .set_authn_credentials(name, who, &credentials_json(&c)?)
                                .await?;
                            tracing::info!(authenticator = %name, user = who, "initial user created");
                        }
                    }
                    Authenticator::Basic(BasicAuthenticator {
                        name: name.clone(),
                        authorizer: authorizer_name.clone(),
                        skip_on_failure: *skip_on_failure,
                        iterations: *credential_iterations,
                        users: RwLock::new(None),
                        validated: Mutex::new(HashMap::new()),
                    })
                }
                AuthenticatorConfig::Anonymous {
                    name,
                    identity,
                    authorizer_name,
                } => Authenticator::Anonymous {
                    identity: Identity {
                        name: identity.clone(),
                        authorizer: authorizer_name.clone(),
                        authenticated_by: name.clone(),
                    },
                },
                AuthenticatorConfig::AllowAll { name } => {
                    authorizers
                        .entry("allowAll".to_string())
                        .or_insert(Authorizer::AllowAll);
                    Authenticator::AllowAll { name: name.clone() }
                }
            });
        }
        let mut process_salt = [0u8; 16];
        ring::rand::SystemRandom::new()
            .fill(&mut process_salt)
            .map_err(|_| AuthError::Internal("the system random source failed".into()))?;
        Ok(Arc::new(Security {
            chain,
            authorizers,
            unsecured_paths: config.unsecured_paths.clone(),
            authorize_system_tables_directly: config.authorize_system_tables_directly,
            metadata,
            process_salt,
        }))
    }

    /// Whether `path` is served without authentication: `/status/health`, `/status/ready`,
    /// the leader checks (`.../coordinator/v1/isLeader`, `.../indexer/v1/isLeader`) and
    /// `service.auth.unsecuredPaths` (Druid's unsecured paths).
    pub fn is_unsecured_path(&self, path: &str) -> bool {
        const OPEN: [&str; 2] = ["/status/health", "/status/ready"];
        const OPEN_SUFFIXES: [&str; 2] = ["/coordinator/v1/isLeader", "/indexer/v1/isLeader"];
        OPEN.contains(&path)
            || OPEN_SUFFIXES.iter().any(|s| {
                path.strip_suffix(s)
                    .is_some_and(|p| p == "/druid" || p == "/service")
            })
            || self.unsecured_paths.iter().any(|p| p == path)
    }

    /// Whether a basic authenticator is in the chain (then 401s carry
    /// `WWW-Authenticate: Basic`).
    pub fn has_basic_authenticator(&self) -> bool {
        self.chain
            .iter()
            .any(|a| matches!(a, Authenticator::Basic(_)))
    }

    /// Runs the chain on the `Authorization` header value (Druid's `BasicHTTPAuthenticator`):
    /// a header not starting with exactly `Basic ` counts as no credentials; undecodable
    /// base64 or no `:` is rejected; an unknown user (or one without credentials) is rejected
    /// unless `skipOnFailure`, then the next authenticator tries; a known user with a wrong
    /// password is always rejected.
    ///
    /// # Errors
    /// When the metadata store fails while loading users.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<AuthnOutcome, AuthError> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Basic "))
            .filter(|t| !t.is_empty());
        for a in &self.chain {
            match a {
                Authenticator::AllowAll { name } => {
                    return Ok(AuthnOutcome::Authenticated(Identity {
                        name: "allowAll".into(),
                        authorizer: "allowAll".into(),
                        authenticated_by: name.clone(),
                    }));
                }
                Authenticator::Anonymous { identity } => {
                    return Ok(AuthnOutcome::Authenticated(identity.clone()));
                }
                Authenticator::Basic(b) => {
                    let Some(token) = token else { continue };
                    let Some((user, password)) = decode_basic(token) else {
                        return Ok(AuthnOutcome::Rejected(
                            "Unable to decode the basic credentials.".into(),
                        ));
                    };
                    let users = self.users_of(b).await?;
                    let Some(Some(creds)) = users.get(&user) else {
                        if b.skip_on_failure {
                            continue;
                        }
                        return Ok(AuthnOutcome::Rejected("User authentication failed.".into()));
                    };
                    if self.check_password(b, &user, &password, creds).await {
                        return Ok(AuthnOutcome::Authenticated(Identity {
                            name: user,
                            authorizer: b.authorizer.clone(),
                            authenticated_by: b.name.clone(),
                        }));
                    }
                    return Ok(AuthnOutcome::Rejected("User authentication failed.".into()));
                }
            }
        }
        Ok(AuthnOutcome::Unauthenticated)
    }

    /// Checks a password against stored credentials: a recent successful login of the same
    /// user and password against the same stored hash is remembered (keyed by a salted
    /// SHA-256, never the password); otherwise PBKDF2 runs on a blocking thread.
    async fn check_password(
        &self,
        b: &BasicAuthenticator,
        user: &str,
        password: &str,
        creds: &Credentials,
    ) -> bool {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&self.process_salt);
        ctx.update(user.as_bytes());
        ctx.update(&[0]);
        ctx.update(password.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(ctx.finish().as_ref());
        if let Some(hash) = b.validated.lock().expect("validated cache").get(&key)
            && constant_time_eq(hash, &creds.hash)
        {
            return true;
        }
        let c = creds.clone();
        let p = password.to_string();
        let ok = tokio::task::spawn_blocking(move || c.verify(&p))
            .await
            .unwrap_or(false);
        if ok {
            let mut cache = b.validated.lock().expect("validated cache");
            if cache.len() >= VALIDATED_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key, creds.hash.clone());
        }
        ok
    }

    async fn users_of(&self, b: &BasicAuthenticator) -> Result<Arc<UserMap>, AuthError> {
        if let Some(m) = b.users.read().expect("user cache").as_ref() {
            return Ok(Arc::clone(m));
        }
        let mut map = HashMap::new();
        for u in self.metadata.authn_users(&b.name).await? {
            let creds = match u.credentials {
                None => None,
                Some(v) => Some(serde_json::from_value::<Credentials>(v).map_err(|e| {
                    AuthError::Internal(format!(
                        "stored credentials of user [{}] do not decode: {e}",
                        u.name
                    ))
                })?),
            };
            map.insert(u.name, creds);
        }
        let map = Arc::new(map);
        *b.users.write().expect("user cache") = Some(Arc::clone(&map));
        Ok(map)
    }

    async fn authz_of(
        &self,
        authorizer: &str,
        cache: &RwLock<Option<Arc<AuthzCache>>>,
    ) -> Result<Arc<AuthzCache>, AuthError> {
        if let Some(c) = cache.read().expect("authz cache").as_ref() {
            return Ok(Arc::clone(c));
        }
        let snapshot = self.metadata.authz_snapshot(authorizer).await?;
        let mut roles = HashMap::new();
        for r in &snapshot.roles {
            let (_, compiled) =
                crate::resource::parse_permissions(&r.permissions).map_err(|e| {
                    AuthError::Internal(format!("stored permissions of role [{}]: {e}", r.name))
                })?;
            roles.insert(r.name.clone(), compiled);
        }
        let users = snapshot
            .users
            .iter()
            .map(|u| (u.name.clone(), u.roles.clone()))
            .collect();
        let c = Arc::new(AuthzCache {
            snapshot,
            users,
            roles,
        });
        *cache.write().expect("authz cache") = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Whether `identity` may do `wanted` (Druid's `BasicRoleBasedAuthorizer`): some role of the
    /// user holds a permission of the same type and action whose name pattern matches the whole
    /// resource name. An unknown user, or an unknown authorizer, is denied.
    ///
    /// # Errors
    /// When the metadata store fails while loading roles.
    pub async fn authorize(
        &self,
        identity: &Identity,
        wanted: &ResourceAction,
    ) -> Result<bool, AuthError> {
        match self.authorizers.get(&identity.authorizer) {
            None => {
                tracing::error!(authorizer = %identity.authorizer, "no such authorizer");
                Ok(false)
            }
            Some(Authorizer::AllowAll) => Ok(true),
            Some(Authorizer::Basic { cache }) => {
                let c = self.authz_of(&identity.authorizer, cache).await?;
                let Some(roles) = c.users.get(&identity.name) else {
                    return Ok(false);
                };
                Ok(roles.iter().any(|r| {
                    c.roles
                        .get(r)
                        .is_some_and(|perms| perms.iter().any(|p| p.grants(wanted)))
                }))
            }
        }
    }

    /// Everything `identity` may do, resolved once, for callers that check many resources
    /// without awaiting each (the rows of `sys` and `INFORMATION_SCHEMA` tables). Same
    /// decisions as [`Security::authorize`], as of the authorizer cache at this call.
    ///
    /// # Errors
    /// When the metadata store fails while loading roles.
    pub async fn grants(&self, identity: &Identity) -> Result<Grants, AuthError> {
        match self.authorizers.get(&identity.authorizer) {
            None => Ok(Grants::Some(Vec::new())),
            Some(Authorizer::AllowAll) => Ok(Grants::All),
            Some(Authorizer::Basic { cache }) => {
                let c = self.authz_of(&identity.authorizer, cache).await?;
                let perms = c
                    .users
                    .get(&identity.name)
                    .map(|roles| {
                        roles
                            .iter()
                            .filter_map(|r| c.roles.get(r))
                            .flatten()
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Grants::Some(perms))
            }
        }
    }

    /// Whether a query reading a `sys` table also needs `SYSTEM_TABLE` READ on its name
    /// ([`crate::config::SecurityConfig::authorize_system_tables_directly`]).
    pub fn authorize_system_tables_directly(&self) -> bool {
        self.authorize_system_tables_directly
    }

    /// Empties every cache, so the next request reads users and roles from the metadata store
    /// (`refreshAll`; also run periodically to pick up changes made by other processes).
    pub fn invalidate_all(&self) {
        for a in &self.chain {
            if let Authenticator::Basic(b) = a {
                b.invalidate();
            }
        }
        for a in self.authorizers.values() {
            if let Authorizer::Basic { cache } = a {
                *cache.write().expect("authz cache") = None;
            }
        }
    }

    // --- the authentication API ---

    fn basic_authenticator(&self, name: &str) -> Result<&BasicAuthenticator, AuthError> {
        self.chain
            .iter()
            .find_map(|a| match a {
                Authenticator::Basic(b) if b.name == name => Some(b),
                _ => None,
            })
            .ok_or_else(|| {
                AuthError::BadRequest(format!(
                    "Basic authenticator with name [{name}] does not exist."
                ))
            })
    }

    /// `GET .../authentication/loadStatus`: `{name: true}` per basic authenticator.
    pub fn authentication_load_status(&self) -> Value {
        let mut m = serde_json::Map::new();
        for a in &self.chain {
            if let Authenticator::Basic(b) = a {
                m.insert(b.name.clone(), Value::Bool(true));
            }
        }
        Value::Object(m)
    }

    /// `GET .../db/{authn}/users`: the user names.
    ///
    /// # Errors
    /// An unknown authenticator (400); the metadata store failing.
    pub async fn authn_user_names(&self, authn: &str) -> Result<Vec<String>, AuthError> {
        let b = self.basic_authenticator(authn)?;
        let mut names: Vec<String> = self.users_of(b).await?.keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    /// `GET .../db/{authn}/users/{user}`: `{"name","credentials":{salt,hash,iterations}|null}`.
    ///
    /// # Errors
    /// An unknown authenticator or user (400).
    pub async fn authn_user(&self, authn: &str, user: &str) -> Result<Value, AuthError> {
        let b = self.basic_authenticator(authn)?;
        let users = self.users_of(b).await?;
        let Some(creds) = users.get(user) else {
            return Err(AuthError::BadRequest(format!(
                "User [{user}] does not exist."
            )));
        };
        Ok(json!({"name": user, "credentials": creds}))
    }

    /// `POST .../db/{authn}/users/{user}`: creates a user without credentials.
    ///
    /// # Errors
    /// An unknown authenticator; `User [x] already exists.` (400).
    pub async fn create_authn_user(&self, authn: &str, user: &str) -> Result<(), AuthError> {
        let b = self.basic_authenticator(authn)?;
        let r = self.metadata.create_authn_user(authn, user).await;
        b.invalidate();
        Ok(r?)
    }

    /// `DELETE .../db/{authn}/users/{user}`: the user cannot log in from the next request on.
    ///
    /// # Errors
    /// An unknown authenticator; `User [x] does not exist.` (400).
    pub async fn delete_authn_user(&self, authn: &str, user: &str) -> Result<(), AuthError> {
        let b = self.basic_authenticator(authn)?;
        let r = self.metadata.delete_authn_user(authn, user).await;
        b.invalidate();
        Ok(r?)
    }

    /// `POST .../db/{authn}/users/{user}/credentials` with `{"password": ..., "iterations"?}`:
    /// stores a new salted hash (never the password).
    ///
    /// # Errors
    /// `Cannot assign null password.` / `Cannot assign empty password.`, an unknown
    /// authenticator or user (400).
    pub async fn set_authn_credentials(
        &self,
        authn: &str,
        user: &str,
        body: &Value,
    ) -> Result<(), AuthError> {
        let b = self.basic_authenticator(authn)?;
        let password = match body.get("password") {
            None | Some(Value::Null) => {
                return Err(AuthError::BadRequest("Cannot assign null password.".into()));
            }
            Some(Value::String(p)) => p,
            Some(_) => {
                return Err(AuthError::BadRequest(
                    "Invalid credentials: password must be a string".into(),
                ));
            }
        };
        let iterations = match body.get("iterations") {
            None | Some(Value::Null) => b.iterations,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    AuthError::BadRequest(
                        "Invalid credentials: iterations must be a positive integer".into(),
                    )
                })?,
        };
        let p = password.clone();
        let creds = tokio::task::spawn_blocking(move || Credentials::generate(&p, iterations))
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))??;
        let r = self
            .metadata
            .set_authn_credentials(authn, user, &credentials_json(&creds)?)
            .await;
        b.invalidate();
        Ok(r?)
    }

    // --- the authorization API ---

    fn basic_authorizer(&self, name: &str) -> Result<&RwLock<Option<Arc<AuthzCache>>>, AuthError> {
        match self.authorizers.get(name) {
            Some(Authorizer::Basic { cache }) => Ok(cache),
            _ => Err(AuthError::BadRequest(format!(
                "Basic authorizer with name [{name}] does not exist."
            ))),
        }
    }

    /// `GET .../authorization/loadStatus`: `{name: true}` per basic authorizer.
    pub fn authorization_load_status(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (name, a) in &self.authorizers {
            if matches!(a, Authorizer::Basic { .. }) {
                m.insert(name.clone(), Value::Bool(true));
            }
        }
        Value::Object(m)
    }

    async fn snapshot(&self, authz: &str) -> Result<Arc<AuthzCache>, AuthError> {
        let cache = self.basic_authorizer(authz)?;
        self.authz_of(authz, cache).await
    }

    fn invalidate_authz(&self, authz: &str) {
        if let Ok(cache) = self.basic_authorizer(authz) {
            *cache.write().expect("authz cache") = None;
        }
    }

    /// `GET .../db/{authz}/users`: user names.
    ///
    /// # Errors
    /// An unknown authorizer (400).
    pub async fn authz_user_names(&self, authz: &str) -> Result<Vec<String>, AuthError> {
        let c = self.snapshot(authz).await?;
        Ok(c.snapshot.users.iter().map(|u| u.name.clone()).collect())
    }

    /// `GET .../db/{authz}/roles`: role names.
    ///
    /// # Errors
    /// An unknown authorizer (400).
    pub async fn authz_role_names(&self, authz: &str) -> Result<Vec<String>, AuthError> {
        let c = self.snapshot(authz).await?;
        Ok(c.snapshot.roles.iter().map(|r| r.name.clone()).collect())
    }

    /// `GET .../db/{authz}/users/{user}`: `{"name","roles":[names]}`; with `full`, the roles as
    /// objects (`{"name","permissions":[...]}`, simplified with `simplify`).
    ///
    /// # Errors
    /// An unknown authorizer or user (400).
    pub async fn authz_user(
        &self,
        authz: &str,
        user: &str,
        full: bool,
        simplify: bool,
    ) -> Result<Value, AuthError> {
        let c = self.snapshot(authz).await?;
        let Some(u) = c.snapshot.users.iter().find(|u| u.name == user) else {
            return Err(AuthError::BadRequest(format!(
                "User [{user}] does not exist."
            )));
        };
        if !full {
            return Ok(json!({"name": u.name, "roles": u.roles}));
        }
        let roles: Vec<Value> = u
            .roles
            .iter()
            .filter_map(|r| c.snapshot.roles.iter().find(|x| &x.name == r))
            .map(|r| role_json(&r.name, None, &r.permissions, simplify))
            .collect();
        Ok(json!({"name": u.name, "roles": roles}))
    }

    /// `GET .../db/{authz}/roles/{role}`: `{"name","permissions":[{resourceAction,
    /// resourceNamePattern}]}`; `simplify`: `{"name","users":null|[...],"permissions":[{resource,
    /// action}]}`; `full` fills `users`.
    ///
    /// # Errors
    /// An unknown authorizer or role (400).
    pub async fn authz_role(
        &self,
        authz: &str,
        role: &str,
        full: bool,
        simplify: bool,
    ) -> Result<Value, AuthError> {
        let c = self.snapshot(authz).await?;
        let Some(r) = c.snapshot.roles.iter().find(|r| r.name == role) else {
            return Err(AuthError::BadRequest(format!(
                "Role [{role}] does not exist."
            )));
        };
        let users: Option<Vec<String>> = full.then(|| {
            c.snapshot
                .users
                .iter()
                .filter(|u| u.roles.iter().any(|x| x == role))
                .map(|u| u.name.clone())
                .collect()
        });
        Ok(role_json(&r.name, users, &r.permissions, simplify || full))
    }

    /// `GET .../db/{authz}/roles/{role}/permissions`.
    ///
    /// # Errors
    /// An unknown authorizer or role (400).
    pub async fn authz_role_permissions(
        &self,
        authz: &str,
        role: &str,
    ) -> Result<Value, AuthError> {
        let c = self.snapshot(authz).await?;
        let Some(r) = c.snapshot.roles.iter().find(|r| r.name == role) else {
            return Err(AuthError::BadRequest(format!(
                "Role [{role}] does not exist."
            )));
        };
        Ok(role_json(&r.name, None, &r.permissions, false)["permissions"].clone())
    }

    /// `POST .../db/{authz}/users/{user}`.
    ///
    /// # Errors
    /// An unknown authorizer; `User [x] already exists.` (400).
    pub async fn create_authz_user(&self, authz: &str, user: &str) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let r = self.metadata.create_authz_user(authz, user).await;
        self.invalidate_authz(authz);
        Ok(r?)
    }

    /// `DELETE .../db/{authz}/users/{user}` (its assignments go too).
    ///
    /// # Errors
    /// An unknown authorizer; `User [x] does not exist.` (400).
    pub async fn delete_authz_user(&self, authz: &str, user: &str) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let r = self.metadata.delete_authz_user(authz, user).await;
        self.invalidate_authz(authz);
        Ok(r?)
    }

    /// `POST .../db/{authz}/roles/{role}`: a role without permissions.
    ///
    /// # Errors
    /// An unknown authorizer; `Role [r] already exists.` (400).
    pub async fn create_authz_role(&self, authz: &str, role: &str) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let r = self
            .metadata
            .create_authz_role(authz, role, &json!([]))
            .await;
        self.invalidate_authz(authz);
        Ok(r?)
    }

    /// `DELETE .../db/{authz}/roles/{role}` (its assignments go too).
    ///
    /// # Errors
    /// An unknown authorizer; `Role [r] does not exist.` (400).
    pub async fn delete_authz_role(&self, authz: &str, role: &str) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let r = self.metadata.delete_authz_role(authz, role).await;
        self.invalidate_authz(authz);
        Ok(r?)
    }

    /// `POST|DELETE .../db/{authz}/users/{user}/roles/{role}`.
    ///
    /// # Errors
    /// An unknown authorizer, user or role; `User [u] already has role [r].` /
    /// `User [u] does not have role [r].` (400).
    pub async fn set_authz_user_role(
        &self,
        authz: &str,
        user: &str,
        role: &str,
        assigned: bool,
    ) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let r = self
            .metadata
            .set_authz_user_role(authz, user, role, assigned)
            .await;
        self.invalidate_authz(authz);
        Ok(r?)
    }

    /// `POST .../db/{authz}/roles/{role}/permissions`: replaces the role's permissions with the
    /// array `[{resource{name,type},action}]`.
    ///
    /// # Errors
    /// A body that does not parse or a name that is not a regular expression, an unknown
    /// authorizer or role (400).
    pub async fn set_authz_role_permissions(
        &self,
        authz: &str,
        role: &str,
        body: &Value,
    ) -> Result<(), AuthError> {
        self.basic_authorizer(authz)?;
        let (list, _) = crate::resource::parse_permissions(body)?;
        let stored = serde_json::to_value(&list).map_err(|e| AuthError::Internal(e.to_string()))?;
        let r = self
            .metadata
            .set_authz_role_permissions(authz, role, &stored)
            .await;
        self.invalidate_authz(authz);
        Ok(r?)
    }
}

impl BasicAuthenticator {
    fn invalidate(&self) {
        *self.users.write().expect("user cache") = None;
        self.validated.lock().expect("validated cache").clear();
    }
}

fn credentials_json(c: &Credentials) -> Result<Value, AuthError> {
    serde_json::to_value(c).map_err(|e| AuthError::Internal(e.to_string()))
}

/// A role as the API shows it. Druid's stored permission is `{resourceAction,
/// resourceNamePattern}`; the simplified form is the `{resource, action}` that was posted.
fn role_json(name: &str, users: Option<Vec<String>>, permissions: &Value, simplify: bool) -> Value {
    let list = permissions.as_array().cloned().unwrap_or_default();
    if simplify {
        return json!({"name": name, "users": users, "permissions": list});
    }
    let perms: Vec<Value> = list
        .into_iter()
        .map(|p| {
            let pattern = p["resource"]["name"].clone();
            json!({"resourceAction": p, "resourceNamePattern": pattern})
        })
        .collect();
    json!({"name": name, "permissions": perms})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use dolmen_common::config::Properties;

    async fn security(extra: &str) -> Arc<Security> {
        let props = Properties::parse(&format!(
            "service.auth.authenticatorChain=[\"basic\"]
service.auth.authenticator.basic.type=basic
service.auth.authenticator.basic.initialAdminPassword=adminpw
service.auth.authenticator.basic.authorizerName=authz
service.auth.authenticator.basic.credentialIterations=1000
service.auth.authorizers=[\"authz\"]
service.auth.authorizer.authz.type=basic
{extra}"
        ));
        let config = SecurityConfig::from_properties(&props).unwrap().unwrap();
        let store = dolmen_metadata::SqlMetadataStore::connect("sqlite::memory:")
            .await
            .unwrap();
        Security::start(&config, Arc::new(store)).await.unwrap()
    }

    fn basic(user: &str, password: &str) -> String {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    fn read(ds: &str) -> ResourceAction {
        ResourceAction::new(Resource::datasource(ds), Action::Read)
    }

    #[tokio::test]
    async fn chain_users_roles_and_invalidation() {
        let s = security("").await;
        // The initial admin logs in and may do anything.
        let AuthnOutcome::Authenticated(admin) = s
            .authenticate(Some(&basic("admin", "adminpw")))
            .await
            .unwrap()
        else {
            panic!("admin must log in")
        };
        assert!(s.authorize(&admin, &read("anything")).await.unwrap());
        // The second login is served from the validated cache, same answer.
        assert!(matches!(
            s.authenticate(Some(&basic("admin", "adminpw")))
                .await
                .unwrap(),
            AuthnOutcome::Authenticated(_)
        ));
        assert!(matches!(
            s.authenticate(Some(&basic("admin", "wrong")))
                .await
                .unwrap(),
            AuthnOutcome::Rejected(_)
        ));
        assert_eq!(
            s.authenticate(None).await.unwrap(),
            AuthnOutcome::Unauthenticated
        );
        // `Bearer x` is not basic: no credentials.
        assert_eq!(
            s.authenticate(Some("Bearer x")).await.unwrap(),
            AuthnOutcome::Unauthenticated
        );
        assert!(matches!(
            s.authenticate(Some("Basic !!!")).await.unwrap(),
            AuthnOutcome::Rejected(_)
        ));
        // druid_system has no password configured: unknown to the authenticator.
        assert!(matches!(
            s.authenticate(Some(&basic("druid_system", "x")))
                .await
                .unwrap(),
            AuthnOutcome::Rejected(_)
        ));

        // A reader of wiki.* .
        s.create_authn_user("basic", "bob").await.unwrap();
        assert!(matches!(
            s.authenticate(Some(&basic("bob", "pw"))).await.unwrap(),
            AuthnOutcome::Rejected(_)
        ));
        s.set_authn_credentials("basic", "bob", &json!({"password": "pw"}))
            .await
            .unwrap();
        let AuthnOutcome::Authenticated(bob) =
            s.authenticate(Some(&basic("bob", "pw"))).await.unwrap()
        else {
            panic!("bob must log in")
        };
        assert!(!s.authorize(&bob, &read("wikipedia")).await.unwrap());
        s.create_authz_user("authz", "bob").await.unwrap();
        s.create_authz_role("authz", "wiki_reader").await.unwrap();
        s.set_authz_role_permissions(
            "authz",
            "wiki_reader",
            &json!([{"resource": {"name": "wiki.*", "type": "DATASOURCE"}, "action": "READ"}]),
        )
        .await
        .unwrap();
        s.set_authz_user_role("authz", "bob", "wiki_reader", true)
            .await
            .unwrap();
        assert!(s.authorize(&bob, &read("wikipedia")).await.unwrap());
        assert!(!s.authorize(&bob, &read("koalas")).await.unwrap());
        assert!(
            !s.authorize(
                &bob,
                &ResourceAction::new(Resource::datasource("wikipedia"), Action::Write)
            )
            .await
            .unwrap()
        );
        // A changed password: the old one is refused on the next request.
        s.set_authn_credentials("basic", "bob", &json!({"password": "pw2"}))
            .await
            .unwrap();
        assert!(matches!(
            s.authenticate(Some(&basic("bob", "pw"))).await.unwrap(),
            AuthnOutcome::Rejected(_)
        ));
        // A removed role: denied on the next request.
        s.set_authz_user_role("authz", "bob", "wiki_reader", false)
            .await
            .unwrap();
        assert!(!s.authorize(&bob, &read("wikipedia")).await.unwrap());
        // A deleted user: refused.
        s.delete_authn_user("basic", "bob").await.unwrap();
        assert!(matches!(
            s.authenticate(Some(&basic("bob", "pw2"))).await.unwrap(),
            AuthnOutcome::Rejected(_)
        ));
        // The API's read side.
        assert_eq!(
            s.authn_user_names("basic").await.unwrap(),
            vec!["admin".to_string()]
        );
        let role = s.authz_role("authz", "admin", false, true).await.unwrap();
        assert_eq!(role["permissions"].as_array().unwrap().len(), 14);
        assert_eq!(
            s.authn_user("nope", "x").await.unwrap_err().to_string(),
            "Basic authenticator with name [nope] does not exist."
        );
        assert_eq!(
            s.set_authn_credentials("basic", "admin", &json!({}))
                .await
                .unwrap_err()
                .to_string(),
            "Cannot assign null password."
        );
    }

    /// The per-request cost of security once a user has logged in: the chain (a cached
    /// login) and one authorization. A measurement, not a check: run with
    /// `cargo test -p dolmen-auth --release -- --ignored --nocapture per_request_cost`.
    #[tokio::test]
    #[ignore]
    async fn per_request_cost() {
        let s = security("").await;
        s.create_authz_role("authz", "r").await.unwrap();
        let mut perms = Vec::new();
        for i in 0..20 {
            perms.push(json!({"resource": {"name": format!("ds{i}.*"), "type": "DATASOURCE"}, "action": "READ"}));
        }
        s.set_authz_role_permissions("authz", "r", &Value::Array(perms))
            .await
            .unwrap();
        s.create_authn_user("basic", "bob").await.unwrap();
        s.set_authn_credentials("basic", "bob", &json!({"password": "pw"}))
            .await
            .unwrap();
        s.create_authz_user("authz", "bob").await.unwrap();
        s.set_authz_user_role("authz", "bob", "r", true)
            .await
            .unwrap();
        let header = basic("bob", "pw");
        let wanted = read("ds19_events");
        // Warm the caches (the first login runs PBKDF2).
        let AuthnOutcome::Authenticated(who) = s.authenticate(Some(&header)).await.unwrap() else {
            panic!()
        };
        assert!(s.authorize(&who, &wanted).await.unwrap());
        let n = 20_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            let AuthnOutcome::Authenticated(who) = s.authenticate(Some(&header)).await.unwrap()
            else {
                panic!()
            };
            assert!(s.authorize(&who, &wanted).await.unwrap());
        }
        let per = t.elapsed() / n;
        println!(
            "authenticate (cached) + authorize (20 permissions, last one matches): {per:?} per request"
        );
    }

    #[tokio::test]
    async fn skip_on_failure_passes_unknown_users_on() {
        let s = security(
            "service.auth.authenticatorChain=[\"basic\",\"anon\"]
service.auth.authenticator.basic.skipOnFailure=true
service.auth.authenticator.anon.type=anonymous
service.auth.authenticator.anon.authorizerName=authz",
        )
        .await;
        let AuthnOutcome::Authenticated(who) =
            s.authenticate(Some(&basic("stranger", "x"))).await.unwrap()
        else {
            panic!("anonymous must take over")
        };
        assert_eq!(who.name, "defaultUser");
        // A known user with a wrong password is refused even with skipOnFailure.
        assert!(matches!(
            s.authenticate(Some(&basic("admin", "wrong")))
                .await
                .unwrap(),
            AuthnOutcome::Rejected(_)
        ));
    }
}
