//! Security on: basic authentication over the chain, the user/role API with Druid's messages,
//! authorization of routes and SQL, and changes that take effect on the next request.

use std::time::{Duration, Instant};

use reqwest::blocking::RequestBuilder;
use serde_json::{Value, json};

use crate::common::{Server, inline_rows, inline_spec};

const AUTHN: &str = "/service-ext/basic-security/authentication/db/basic";
const AUTHZ: &str = "/service-ext/basic-security/authorization/db/authz";

const CONFIG: &str = r#"
service.auth.authenticatorChain=["basic"]
service.auth.authenticator.basic.type=basic
service.auth.authenticator.basic.initialAdminPassword={"type":"environment","variable":"DOLMEN_IT_ADMIN_PASSWORD"}
service.auth.authenticator.basic.initialInternalClientPassword=internal-pw
service.auth.authenticator.basic.credentialsValidator.type=metadata
service.auth.authenticator.basic.authorizerName=authz
service.escalator.type=basic
service.escalator.internalClientUsername=druid_system
service.escalator.internalClientPassword=internal-pw
service.escalator.authorizerName=authz
service.auth.authorizers=["authz"]
service.auth.authorizer.authz.type=basic
"#;

/// A client acting as one user (or nobody).
struct As<'a> {
    s: &'a Server,
    user: Option<(&'a str, &'a str)>,
}

impl As<'_> {
    fn req(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let r = self
            .s
            .client
            .request(method, format!("{}{path}", self.s.url));
        match self.user {
            Some((u, p)) => r.basic_auth(u, Some(p)),
            None => r,
        }
    }

    fn send(&self, r: RequestBuilder) -> (u16, String, String) {
        let resp = r.send().unwrap();
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, ct, resp.text().unwrap())
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let (s, _, t) = self.send(self.req(reqwest::Method::GET, path));
        (s, serde_json::from_str(&t).unwrap_or(Value::String(t)))
    }

    fn post(&self, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut r = self.req(reqwest::Method::POST, path);
        if let Some(b) = body {
            r = r.json(b);
        }
        let (s, _, t) = self.send(r);
        (s, serde_json::from_str(&t).unwrap_or(Value::String(t)))
    }

    fn delete(&self, path: &str) -> (u16, Value) {
        let (s, _, t) = self.send(self.req(reqwest::Method::DELETE, path));
        (s, serde_json::from_str(&t).unwrap_or(Value::String(t)))
    }

    fn sql(&self, query: &str) -> (u16, Value) {
        self.post("/service/v2/sql", Some(&json!({ "query": query })))
    }

    fn run_task(&self, spec: &Value) -> Value {
        let (code, body) = self.post("/service/indexer/v1/task", Some(spec));
        assert_eq!(code, 200, "{body}");
        let id = body["task"].as_str().unwrap();
        self.s.wait_task_as(id, |p| self.get(p))
    }
}

impl Server {
    /// Waits for a task, reading its status through `get`.
    fn wait_task_as(&self, id: &str, get: impl Fn(&str) -> (u16, Value)) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (code, st) = get(&format!("/service/indexer/v1/task/{id}/status"));
            assert_eq!(code, 200, "{st}");
            if st["status"]["status"] != "RUNNING" {
                return st["status"].clone();
            }
            assert!(Instant::now() < deadline, "task {id} did not finish");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("runtime.properties");
    std::fs::write(&config, CONFIG).unwrap();
    // SAFETY: set before the child starts; the child inherits it.
    unsafe { std::env::set_var("DOLMEN_IT_ADMIN_PASSWORD", "admin-pw") };
    let s = Server::start_with_args(
        &dir.path().join("data"),
        &["--config", config.to_str().unwrap()],
    );
    (dir, s)
}

fn grant(admin: &As<'_>, user: &str, password: &str, role: &str, permissions: Value) {
    assert_eq!(admin.post(&format!("{AUTHN}/users/{user}"), None).0, 200);
    assert_eq!(
        admin
            .post(
                &format!("{AUTHN}/users/{user}/credentials"),
                Some(&json!({ "password": password }))
            )
            .0,
        200
    );
    assert_eq!(admin.post(&format!("{AUTHZ}/users/{user}"), None).0, 200);
    if admin.get(&format!("{AUTHZ}/roles/{role}")).0 != 200 {
        assert_eq!(admin.post(&format!("{AUTHZ}/roles/{role}"), None).0, 200);
        assert_eq!(
            admin
                .post(
                    &format!("{AUTHZ}/roles/{role}/permissions"),
                    Some(&permissions)
                )
                .0,
            200
        );
    }
    assert_eq!(
        admin
            .post(&format!("{AUTHZ}/users/{user}/roles/{role}"), None)
            .0,
        200
    );
}

#[test]
fn basic_security_end_to_end() {
    let (_dir, s) = start();
    let nobody = As { s: &s, user: None };
    let admin = As {
        s: &s,
        user: Some(("admin", "admin-pw")),
    };

    // Open paths stay open; everything else needs credentials.
    assert_eq!(nobody.get("/status/health"), (200, json!(true)));
    assert_eq!(nobody.get("/service/indexer/v1/isLeader").0, 200);
    let resp = nobody
        .req(reqwest::Method::POST, "/service/v2/sql")
        .json(&json!({"query": "SELECT 1"}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert!(
        resp.headers()
            .get("www-authenticate")
            .is_some_and(|v| v.to_str().unwrap().starts_with("Basic")),
        "401 must carry WWW-Authenticate"
    );
    let body: Value = resp.json().unwrap();
    assert_eq!(body["error"], "Unauthorized request");
    assert_eq!(nobody.get("/status").0, 401);
    assert_eq!(nobody.get("/no/such/path").0, 401);
    let wrong = As {
        s: &s,
        user: Some(("admin", "nope")),
    };
    assert_eq!(wrong.sql("SELECT 1").0, 401);
    let stranger = As {
        s: &s,
        user: Some(("stranger", "x")),
    };
    assert_eq!(stranger.sql("SELECT 1").0, 401);

    // The initial users: admin with full rights; druid_system with its configured password.
    assert_eq!(admin.sql("SELECT 1 AS x"), (200, json!([{"x": 1}])));
    let internal = As {
        s: &s,
        user: Some(("druid_system", "internal-pw")),
    };
    assert_eq!(internal.get("/status").0, 200);
    let (code, user) = admin.get(&format!("{AUTHN}/users/admin"));
    assert_eq!(code, 200);
    assert_eq!(user["credentials"]["iterations"], 10000);
    assert_eq!(user["credentials"]["hash"].as_str().unwrap().len(), 88);
    assert!(!user.to_string().contains("admin-pw"));
    let (_, role) = admin.get(&format!("{AUTHZ}/roles/admin?simplifyPermissions"));
    assert_eq!(role["permissions"].as_array().unwrap().len(), 14);
    assert_eq!(
        admin.get("/service-ext/basic-security/authentication/loadStatus"),
        (200, json!({"basic": true}))
    );
    // The /druid-ext tree answers the same.
    assert_eq!(
        admin
            .get("/druid-ext/basic-security/authorization/db/authz/users")
            .1,
        json!(["admin", "druid_system"])
    );

    // Two datasources.
    for ds in ["wikipedia", "koalas"] {
        let st = admin.run_task(&inline_spec(
            ds,
            &inline_rows(1_600_000_000_000, 1000, 5),
            &[],
            false,
        ));
        assert_eq!(st["status"], "SUCCESS", "{st}");
    }

    // Druid's messages.
    assert_eq!(
        admin.post(&format!("{AUTHN}/users/admin"), None),
        (400, json!({"error": "User [admin] already exists."}))
    );
    assert_eq!(
        admin.get(&format!("{AUTHN}/users/ghost")),
        (400, json!({"error": "User [ghost] does not exist."}))
    );
    assert_eq!(
        admin.get("/service-ext/basic-security/authentication/db/nope/users"),
        (
            400,
            json!({"error": "Basic authenticator with name [nope] does not exist."})
        )
    );
    assert_eq!(
        admin.post(&format!("{AUTHZ}/users/admin/roles/ghost"), None),
        (400, json!({"error": "Role [ghost] does not exist."}))
    );
    assert_eq!(
        admin.post(
            &format!("{AUTHN}/users/admin/credentials"),
            Some(&json!({}))
        ),
        (400, json!({"error": "Cannot assign null password."}))
    );
    let (code, body) = admin.post(
        &format!("{AUTHZ}/roles/admin/permissions"),
        Some(&json!([{"resource": {"name": "x", "type": "TABLE"}, "action": "READ"}])),
    );
    assert_eq!(code, 400, "{body}");

    // bob reads wiki.*; nothing else.
    grant(
        &admin,
        "bob",
        "bob-pw",
        "wiki_reader",
        json!([{"resource": {"name": "wiki.*", "type": "DATASOURCE"}, "action": "READ"}]),
    );
    let bob = As {
        s: &s,
        user: Some(("bob", "bob-pw")),
    };
    assert_eq!(
        bob.sql("SELECT COUNT(*) AS c FROM wikipedia"),
        (200, json!([{"c": 5}]))
    );
    let denied = json!({"Access-Check-Result": "Unauthorized"});
    assert_eq!(
        bob.sql("SELECT COUNT(*) AS c FROM koalas"),
        (403, denied.clone())
    );
    assert_eq!(
        bob.sql("SELECT COUNT(*) FROM wikipedia w JOIN koalas k ON w.page = k.page"),
        (403, denied.clone())
    );
    assert_eq!(
        bob.sql("SELECT * FROM wikipedia WHERE page IN (SELECT page FROM koalas)"),
        (403, denied.clone())
    );
    // System tables show only rows of datasources bob may read (Druid's SystemSchema and
    // InformationSchema filters); the server tables need STATE READ.
    assert_eq!(
        bob.sql("SELECT DISTINCT datasource FROM sys.segments"),
        (200, json!([{"datasource": "wikipedia"}]))
    );
    assert_eq!(
        admin
            .sql("SELECT DISTINCT datasource FROM sys.segments ORDER BY 1")
            .1,
        json!([{"datasource": "koalas"}, {"datasource": "wikipedia"}])
    );
    assert_eq!(
        bob.sql("SELECT DISTINCT datasource FROM sys.tasks"),
        (200, json!([{"datasource": "wikipedia"}]))
    );
    assert_eq!(
        bob.sql("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"),
        (200, json!([{"TABLE_NAME": "wikipedia"}]))
    );
    assert_eq!(
        bob.sql("SELECT COUNT(*) AS c FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'koalas'"),
        (200, json!([{"c": 0}]))
    );
    // A datasource bob may not read stays invisible even through a join with an allowed one.
    assert_eq!(
        bob.sql(
            "SELECT COUNT(*) AS c FROM sys.segments s JOIN INFORMATION_SCHEMA.TABLES t \
             ON s.datasource = t.TABLE_NAME WHERE s.datasource = 'koalas'"
        ),
        (200, json!([{"c": 0}]))
    );
    for table in ["servers", "server_segments", "server_properties"] {
        assert_eq!(
            bob.sql(&format!("SELECT * FROM sys.{table}")),
            (403, denied.clone()),
            "{table}"
        );
    }
    assert_eq!(admin.sql("SELECT * FROM sys.servers").0, 200);
    // Statements run later as tasks, without the user: system tables are refused there.
    let (code, body) = bob.post(
        "/service/v2/sql/statements",
        Some(&json!({"query": "SELECT * FROM sys.segments"})),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("sys.segments"),
        "{body}"
    );
    // An unknown table is still the query's own 400 (validation first).
    assert_eq!(bob.sql("SELECT * FROM nothing_here").0, 400);
    // A query needing no resource is allowed.
    assert_eq!(bob.sql("SELECT 1 AS x").0, 200);
    // Lists are filtered; single resources checked.
    assert_eq!(
        bob.get("/service/coordinator/v1/datasources"),
        (200, json!(["wikipedia"]))
    );
    assert_eq!(
        admin.get("/service/coordinator/v1/datasources").1,
        json!(["koalas", "wikipedia"])
    );
    assert_eq!(
        bob.get("/service/coordinator/v1/datasources/wikipedia").0,
        200
    );
    assert_eq!(
        bob.get("/service/coordinator/v1/datasources/koalas"),
        (403, denied.clone())
    );
    let tasks = bob.get("/service/indexer/v1/tasks").1;
    assert_eq!(tasks.as_array().unwrap().len(), 1, "{tasks}");
    assert_eq!(tasks[0]["dataSource"], "wikipedia");
    // READ does not give WRITE: no ingestion, no marking unused, nothing changed.
    let (code, _) = bob.post(
        "/service/indexer/v1/task",
        Some(&inline_spec(
            "wikipedia",
            &inline_rows(1_600_000_000_000, 1000, 1),
            &[],
            true,
        )),
    );
    assert_eq!(code, 403);
    assert_eq!(
        bob.delete("/service/coordinator/v1/datasources/wikipedia")
            .0,
        403
    );
    assert_eq!(
        admin.sql("SELECT COUNT(*) AS c FROM wikipedia").1,
        json!([{"c": 5}])
    );
    // Unknown task ids: Druid's 404 text before any check.
    assert_eq!(
        bob.get("/service/indexer/v1/task/nope/status"),
        (404, json!("Cannot find any task with id: [nope]"))
    );
    // The security API needs CONFIG security: 403 as text.
    let (code, ct, text) = bob.send(bob.req(
        reqwest::Method::GET,
        "/service-ext/basic-security/authorization/db/authz/users",
    ));
    assert_eq!(
        (code, text.as_str()),
        (403, "Access-Check-Result: Unauthorized")
    );
    assert!(ct.starts_with("text/plain"), "{ct}");
    // STATE and CONFIG routes.
    assert_eq!(bob.get("/status").0, 403);
    assert_eq!(bob.get("/service/coordinator/v1/lookups/config").0, 403);

    // A user with no permissions runs only queries that need no resource.
    grant(&admin, "nora", "nora-pw", "nothing", json!([]));
    let nora = As {
        s: &s,
        user: Some(("nora", "nora-pw")),
    };
    assert_eq!(nora.sql("SELECT 1 AS x").0, 200);
    assert_eq!(nora.sql("SELECT COUNT(*) FROM wikipedia").0, 403);
    assert_eq!(
        nora.get("/service/coordinator/v1/datasources"),
        (200, json!([]))
    );

    // An async statement is visible to its submitter, and to STATE READ, not to others.
    let (code, st) = bob.post(
        "/service/v2/sql/statements",
        Some(&json!({"query": "SELECT COUNT(*) AS c FROM wikipedia", "context": {"executionMode": "ASYNC"}})),
    );
    assert_eq!(code, 200, "{st}");
    let qid = st["queryId"].as_str().unwrap().to_string();
    let statement = format!("/service/v2/sql/statements/{qid}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, st) = bob.get(&statement);
        assert_eq!(code, 200, "{st}");
        if st["state"] == "SUCCESS" {
            break;
        }
        assert!(Instant::now() < deadline, "{st}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        bob.get(&format!("{statement}/results")),
        (200, json!([{"c": 5}]))
    );
    assert_eq!(nora.get(&statement), (403, denied.clone()));
    assert_eq!(nora.get(&format!("{statement}/results")).0, 403);
    assert_eq!(nora.delete(&statement).0, 403);
    assert_eq!(admin.get(&statement).0, 200);
    // Cancelling a synchronous query needs READ on everything it uses (spec).
    let st = admin.run_task(&inline_spec(
        "wikibig",
        &inline_rows(1_600_000_000_000, 1000, 3000),
        &[],
        false,
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    let running = {
        let client = s.client.clone();
        let url = format!("{}/service/v2/sql", s.url);
        std::thread::spawn(move || {
            client
                .post(url)
                .basic_auth("bob", Some("bob-pw"))
                .json(&json!({
                    "query": "SELECT SUM(LENGTH(a.page) + LENGTH(b.page) + LENGTH(c.page)) AS c FROM wikibig a CROSS JOIN wikibig b CROSS JOIN wikibig c",
                    "context": {"sqlQueryId": "slow-1"}
                }))
                .send()
                .map(|r| (r.status().as_u16(), r.text().unwrap_or_default()))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // nora may not cancel it: 404 until it runs, then 403.
        let (code, _) = nora.delete("/service/v2/sql/slow-1");
        if code == 403 {
            break;
        }
        assert_eq!(code, 404);
        assert!(
            Instant::now() < deadline,
            "the query never became cancellable"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(bob.delete("/service/v2/sql/slow-1").0, 202);
    let (code, text) = running.join().unwrap().unwrap();
    assert_eq!(code, 500, "{text}");
    assert!(text.contains("Query cancelled"), "{text}");

    // Statements on a table the user may not read are refused at submission.
    assert_eq!(
        bob.post(
            "/service/v2/sql/statements",
            Some(&json!({"query": "SELECT COUNT(*) AS c FROM koalas", "context": {"executionMode": "ASYNC"}}))
        ),
        (403, denied.clone())
    );

    // A writer of koalas (WRITE only): may ingest into koalas, still may not read it.
    grant(
        &admin,
        "wendy",
        "wendy-pw",
        "koala_writer",
        json!([{"resource": {"name": "koalas", "type": "DATASOURCE"}, "action": "WRITE"}]),
    );
    let wendy = As {
        s: &s,
        user: Some(("wendy", "wendy-pw")),
    };
    let (code, body) = wendy.post(
        "/service/indexer/v1/task",
        Some(&inline_spec(
            "koalas",
            &inline_rows(1_600_000_000_000, 1000, 2),
            &[],
            true,
        )),
    );
    assert_eq!(code, 200, "{body}");
    let id = body["task"].as_str().unwrap();
    // Reading the task's status needs READ on koalas (Druid's TaskResourceFilter).
    assert_eq!(
        wendy
            .get(&format!("/service/indexer/v1/task/{id}/status"))
            .0,
        403
    );
    let st = s.wait_task_as(id, |p| admin.get(p));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    assert_eq!(wendy.sql("SELECT COUNT(*) FROM koalas").0, 403);
    assert_eq!(
        admin.sql("SELECT COUNT(*) AS c FROM koalas").1,
        json!([{"c": 7}])
    );

    // Changes take effect on the next request: a changed password, a removed role, a
    // deleted user.
    assert_eq!(
        admin
            .post(
                &format!("{AUTHN}/users/bob/credentials"),
                Some(&json!({"password": "bob-pw2"}))
            )
            .0,
        200
    );
    assert_eq!(bob.sql("SELECT 1").0, 401);
    let bob2 = As {
        s: &s,
        user: Some(("bob", "bob-pw2")),
    };
    assert_eq!(bob2.sql("SELECT COUNT(*) FROM wikipedia").0, 200);
    assert_eq!(
        admin
            .delete(&format!("{AUTHZ}/users/bob/roles/wiki_reader"))
            .0,
        200
    );
    assert_eq!(bob2.sql("SELECT COUNT(*) FROM wikipedia").0, 403);
    assert_eq!(admin.delete(&format!("{AUTHN}/users/bob")).0, 200);
    assert_eq!(bob2.sql("SELECT 1").0, 401);
}

#[test]
fn misconfiguration_stops_start_up_naming_the_property() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("runtime.properties");
    std::fs::write(
        &config,
        "service.auth.authenticatorChain=[\"basic\"]\nservice.auth.authenticator.basic.type=basic\nservice.auth.authenticator.basic.authorizerName=missing\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dolmen"))
        .args(["server", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("service.auth.authenticator.basic.authorizerName"),
        "{stderr}"
    );
}

/// `service.ingestion.local.allowedBaseDirs`: `local` input (native and `EXTERN`) only under the
/// listed directories; a clear 400 naming the property otherwise, before anything runs.
#[test]
fn local_input_is_limited_to_allowed_base_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let row = "{\"ts\":1600000000000,\"page\":\"a\"}\n";
    std::fs::write(allowed.join("in.json"), row).unwrap();
    std::fs::write(outside.join("out.json"), row).unwrap();
    // A symbolic link inside the allowed directory that leads out of it.
    std::os::unix::fs::symlink(outside.join("out.json"), allowed.join("link.json")).unwrap();
    let config = dir.path().join("runtime.properties");
    std::fs::write(
        &config,
        format!(
            "service.ingestion.local.allowedBaseDirs=[\"{}\"]\n",
            allowed.display()
        ),
    )
    .unwrap();
    let s = Server::start_with_args(
        &dir.path().join("data"),
        &["--config", config.to_str().unwrap()],
    );
    let spec = |input: Value| {
        let mut spec = inline_spec("local_ds", "", &[], false);
        spec["spec"]["ioConfig"]["inputSource"] = input;
        spec
    };
    let st = s.run_task(&spec(
        json!({"type": "local", "baseDir": allowed, "filter": "in.json"}),
    ));
    assert_eq!(st["status"], "SUCCESS", "{st}");
    for input in [
        json!({"type": "local", "baseDir": outside, "filter": "*.json"}),
        json!({"type": "local", "files": [outside.join("out.json")]}),
        json!({"type": "local", "files": [allowed.join("../outside/out.json")]}),
    ] {
        let (code, body) = s.post_json("/service/indexer/v1/task", &spec(input.clone()));
        assert_eq!(code, 400, "{input}: {body}");
        assert!(
            body.to_string()
                .contains("service.ingestion.local.allowedBaseDirs"),
            "{body}"
        );
    }
    // The link is found under the allowed directory but resolves outside: the task fails
    // without reading it.
    let st = s.run_task(&spec(
        json!({"type": "local", "baseDir": allowed, "filter": "link.json"}),
    ));
    assert_eq!(st["status"], "FAILED", "{st}");
    assert!(
        st["errorMsg"]
            .as_str()
            .unwrap_or_default()
            .contains("allowedBaseDirs"),
        "{st}"
    );
    // EXTERN: the query's own 400 before it runs.
    let q = format!(
        "INSERT INTO ext_ds SELECT TIME_PARSE(\"ts\") AS __time, page FROM TABLE(EXTERN('{{\"type\":\"local\",\"files\":[\"{}\"]}}', '{{\"type\":\"json\"}}', '[{{\"name\":\"ts\",\"type\":\"string\"}},{{\"name\":\"page\",\"type\":\"string\"}}]')) PARTITIONED BY DAY",
        outside.join("out.json").display()
    );
    let (code, body) = s.post_json("/service/v2/sql/task", &json!({ "query": q }));
    assert_eq!(code, 400, "{body}");
    assert!(body.to_string().contains("allowedBaseDirs"), "{body}");
}

/// A CA and a certificate it signed for `localhost`/`127.0.0.1`: (CA PEM, server PKCS#12 with
/// alias `dolmen` and password `changeit`), generated at run time (no key is committed).
fn tls_material() -> (String, Vec<u8>) {
    let (ca, p12, _, _) = tls_material_pem();
    (ca, p12)
}

/// [`tls_material`] plus the server certificate and key as PEM.
fn tls_material_pem() -> (String, Vec<u8>, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // Distinct names: OpenSSL (Python) takes a leaf whose subject equals its issuer for a
    // self-signed certificate.
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Dolmen test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = params.signed_by(&key, &issuer).unwrap();
    let chain = p12_keystore::PrivateKeyChain::new(
        "dolmen",
        p12_keystore::PrivateKey::from_der(&key.serialize_der()).unwrap(),
        [
            p12_keystore::Certificate::from_der(cert.der()).unwrap(),
            p12_keystore::Certificate::from_der(ca.der()).unwrap(),
        ],
    );
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "dolmen",
        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain),
    );
    let p12 = store.writer("changeit").write().unwrap();
    (ca.pem(), p12, cert.pem(), key.serialize_pem())
}

/// Both listeners at once with security on; the TLS one serves the same API (basic auth over
/// TLS), a client that does not trust the CA is refused, and pydruid (DB-API and SQLAlchemy)
/// works with credentials over TLS.
#[test]
fn tls_listeners_and_pydruid_with_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, p12) = tls_material();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    let ks = dir.path().join("server.p12");
    std::fs::write(&ks, p12).unwrap();
    let config = dir.path().join("runtime.properties");
    // SAFETY: set before the child starts; the child inherits it.
    unsafe { std::env::set_var("DOLMEN_IT_KEYSTORE_PASSWORD", "changeit") };
    std::fs::write(
        &config,
        format!(
            "{CONFIG}\nservice.enablePlaintextPort=true\nservice.enableTlsPort=true\nservice.tlsPort=0\nservice.server.https.keyStoreType=pkcs12\nservice.server.https.keyStorePath={}\nservice.server.https.keyStorePassword={{\"type\":\"environment\",\"variable\":\"DOLMEN_IT_KEYSTORE_PASSWORD\"}}\nservice.server.https.certAlias=dolmen\n",
            ks.display()
        ),
    )
    .unwrap();
    unsafe { std::env::set_var("DOLMEN_IT_ADMIN_PASSWORD", "admin-pw") };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dolmen"))
        .args(["server", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("DOLMEN_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let (line, _rx) =
        crate::common::wait_for_line(&mut child, "Dolmen listening on ", Duration::from_secs(60));
    // Killed on drop with the rest of the test's state.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Kill(child);
    let (plain, tls) = line
        .split_once(" (TLS: ")
        .map(|(p, t)| (p.to_string(), t.trim_end_matches(')').to_string()))
        .unwrap_or_else(|| panic!("both URLs expected: {line}"));
    assert!(tls.starts_with("https://127.0.0.1:"), "{tls}");

    let trusting = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // Open path over TLS; the API needs credentials there too.
    let r = trusting.get(format!("{tls}/status/health")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = trusting
        .post(format!("{tls}/druid/v2/sql"))
        .json(&json!({"query": "SELECT 1 AS x"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = trusting
        .post(format!("{tls}/druid/v2/sql"))
        .basic_auth("admin", Some("admin-pw"))
        .json(&json!({"query": "SELECT 1 AS x"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().unwrap(), json!([{"x": 1}]));
    // The plaintext listener serves the same, at the same time.
    let r = trusting
        .post(format!("{plain}/druid/v2/sql"))
        .basic_auth("admin", Some("admin-pw"))
        .json(&json!({"query": "SELECT 2 AS x"}))
        .send()
        .unwrap();
    assert_eq!(r.json::<Value>().unwrap(), json!([{"x": 2}]));
    // A client that does not trust the private CA cannot connect.
    let untrusting = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(
        untrusting
            .get(format!("{tls}/status/health"))
            .send()
            .is_err()
    );

    // A datasource, ingested over TLS.
    let r = trusting
        .post(format!("{tls}/druid/indexer/v1/task"))
        .basic_auth("admin", Some("admin-pw"))
        .json(&inline_spec(
            "tls_ds",
            &inline_rows(1_600_000_000_000, 1000, 3),
            &[],
            false,
        ))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let id = r.json::<Value>().unwrap()["task"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let st: Value = trusting
            .get(format!("{tls}/druid/indexer/v1/task/{id}/status"))
            .basic_auth("admin", Some("admin-pw"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if st["status"]["status"] != "RUNNING" {
            assert_eq!(st["status"]["status"], "SUCCESS", "{st}");
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }

    let python = match std::env::var("DOLMEN_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ if std::env::var("DOLMEN_SKIP_CLIENT_TESTS").as_deref() == Ok("1") => return,
        _ => panic!(
            "DOLMEN_TEST_PYTHON is not set: run `bash scripts/install-test-deps.sh` and export \
             DOLMEN_TEST_PYTHON=~/.cache/dolmen-test-deps/clients/bin/python, or set \
             DOLMEN_SKIP_CLIENT_TESTS=1"
        ),
    };
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/pydruid_tls.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .arg("127.0.0.1")
        .arg(tls.rsplit(':').next().unwrap())
        .arg(&ca_file)
        .args(["admin", "admin-pw"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("pydruid tls: ok"),
        "pydruid over TLS failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// The authorization matrix: every route of the router (its path table), every method, and a set
/// of users (nobody, no permissions, READ on `wiki.*`, WRITE on `koalas`, STATE READ, CONFIG
/// WRITE, admin). Every request a user is not entitled to gets 401 (nobody) or 403 (404 for an
/// unknown task or supervisor id, which Druid checks first), every GET a user is entitled to gets
/// neither; and after it all, nothing has changed (zero leaks, no side effects).
#[test]
fn authorization_matrix_over_every_route() {
    use dolmen_server::security::{Guard, ROUTE_GUARDS};
    let (_dir, s) = start();
    let admin = As {
        s: &s,
        user: Some(("admin", "admin-pw")),
    };
    for ds in ["wikipedia", "koalas"] {
        let st = admin.run_task(&inline_spec(
            ds,
            &inline_rows(1_600_000_000_000, 1000, 4),
            &[],
            false,
        ));
        assert_eq!(st["status"], "SUCCESS", "{st}");
    }
    let koala_task = admin
        .get("/service/indexer/v1/tasks")
        .1
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["dataSource"] == "koalas")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let perm = |name: &str, t: &str, a: &str| json!([{"resource": {"name": name, "type": t}, "action": a}]);
    grant(&admin, "nora", "pw", "nothing", json!([]));
    grant(
        &admin,
        "wiki",
        "pw",
        "wiki_read",
        perm("wiki.*", "DATASOURCE", "READ"),
    );
    grant(
        &admin,
        "kw",
        "pw",
        "koala_write",
        perm("koalas", "DATASOURCE", "WRITE"),
    );
    grant(
        &admin,
        "st",
        "pw",
        "state_read",
        perm("STATE", "STATE", "READ"),
    );
    grant(
        &admin,
        "cw",
        "pw",
        "config_write",
        perm("CONFIG", "CONFIG", "WRITE"),
    );

    // What each user holds: (type, name, action).
    /// A permission a user holds: (type, name, action).
    type Held = (&'static str, &'static str, &'static str);
    let holds: Vec<(&str, Vec<Held>)> = vec![
        ("nora", vec![]),
        ("wiki", vec![("DATASOURCE", "wikipedia", "READ")]),
        ("kw", vec![("DATASOURCE", "koalas", "WRITE")]),
        ("st", vec![("STATE", "STATE", "READ")]),
        ("cw", vec![("CONFIG", "CONFIG", "WRITE")]),
    ];
    let before = |a: &As<'_>| {
        (
            a.get("/service/coordinator/v1/datasources").1,
            a.sql("SELECT COUNT(*) AS c FROM koalas").1,
            a.get("/service/indexer/v1/tasks")
                .1
                .as_array()
                .unwrap()
                .len(),
            a.get("/service/coordinator/v1/lookups/config/all").1,
            a.get(&format!("{AUTHZ}/users")).1,
            a.get(&format!("{AUTHN}/users")).1,
        )
    };
    let state_before = before(&admin);

    let concrete = |path: &str| {
        path.replace("{data_source}", "koalas")
            .replace("{task_id}", &koala_task)
            .replace("{interval}", "2020-01-01_2021-01-01")
            .replace("{segment_id}", "nosuchsegment")
            .replace("{tier}", "__default")
            .replace("{lookup}", "nolookup")
            .replace("{host_and_port}", "h:1")
            .replace("{authenticator}", "basic")
            .replace("{authorizer}", "authz")
            .replace("{user}", "nobody_here")
            .replace("{role}", "no_role")
    };
    let mut checked = 0;
    for (path, guard) in ROUTE_GUARDS {
        let prefix = if path.starts_with("/basic-security") {
            "/service-ext"
        } else if [
            "/status",
            "/status/health",
            "/status/selfDiscovered",
            "/metrics",
        ]
        .contains(path)
        {
            ""
        } else {
            "/service"
        };
        // Statement ids are task ids; a supervisor id that does not exist.
        let url = format!("{prefix}{}", concrete(path))
            .replace("/statements/{id}", &format!("/statements/{koala_task}"))
            .replace("{id}", "nosuchsupervisor");
        for method in [
            reqwest::Method::GET,
            reqwest::Method::POST,
            reqwest::Method::DELETE,
        ] {
            let read = method == reqwest::Method::GET;
            let action = if read { "READ" } else { "WRITE" };
            let g = match guard {
                Guard::ByMethod(r, w) => {
                    if read {
                        **r
                    } else {
                        **w
                    }
                }
                g => *g,
            };
            let body = match g {
                Guard::Sql => Some(json!({"query": "SELECT COUNT(*) FROM koalas"})),
                Guard::TaskSubmit => Some(inline_spec("koalas", &inline_rows(0, 1, 1), &[], true)),
                Guard::SupervisorSubmit => {
                    Some(json!({"type": "kafka", "spec": {"dataSchema": {"dataSource": "koalas"}}}))
                }
                _ => None,
            };
            let send = |who: Option<(&str, &str)>| {
                let a = As { s: &s, user: who };
                let mut r = a.req(method.clone(), &url);
                if let Some(b) = &body {
                    r = r.json(b);
                }
                a.send(r)
            };
            // Nobody: 401 everywhere but the open paths.
            let (code, _, text) = send(None);
            if g == Guard::Open {
                assert_ne!(code, 401, "{method} {url} is open: {text}");
            } else {
                assert_eq!(code, 401, "{method} {url} without credentials: {text}");
            }
            for (user, held) in &holds {
                let has = |t: &str, n: &str, a: &str| {
                    held.iter().any(|h| h.0 == t && h.1 == n && h.2 == a)
                };
                // None when the answer depends on the route's data (filtered lists, open paths).
                let entitled: Option<bool> = match g {
                    Guard::Open | Guard::ReadableRows => None,
                    Guard::State => Some(has("STATE", "STATE", action)),
                    Guard::Config => Some(has("CONFIG", "CONFIG", action)),
                    Guard::Security | Guard::Unclassified => Some(false),
                    Guard::Datasource(_) | Guard::Task(_) => {
                        Some(has("DATASOURCE", "koalas", action))
                    }
                    // The supervisor does not exist, the id is no statement: 404.
                    Guard::Supervisor(_) | Guard::Statement(_) | Guard::SqlCancel(_) => None,
                    // SQL reads koalas; submissions write koalas.
                    Guard::Sql => Some(false),
                    Guard::TaskSubmit | Guard::SupervisorSubmit => {
                        Some(has("DATASOURCE", "koalas", "WRITE"))
                    }
                    Guard::ByMethod(..) => unreachable!(),
                };
                match entitled {
                    Some(false) => {
                        let (code, _, text) = send(Some((user, "pw")));
                        assert_eq!(code, 403, "{user}: {method} {url} must be denied: {text}");
                    }
                    // Allowed reads answer without 401/403; allowed writes are not sent (they
                    // would change the state this test checks at the end).
                    Some(true) if read => {
                        let (code, _, text) = send(Some((user, "pw")));
                        assert!(
                            code != 401 && code != 403,
                            "{user}: {method} {url}: {code} {text}"
                        );
                    }
                    Some(true) => {}
                    None => {
                        if matches!(
                            g,
                            Guard::Supervisor(_) | Guard::Statement(_) | Guard::SqlCancel(_)
                        ) {
                            // 404, or 405 for a method the route does not serve.
                            let (code, _, text) = send(Some((user, "pw")));
                            assert!(
                                code == 404 || code == 405,
                                "{user}: {method} {url}: {code} {text}"
                            );
                        } else if g == Guard::ReadableRows && read {
                            let (code, _, text) = send(Some((user, "pw")));
                            assert_eq!(code, 200, "{user}: {method} {url}: {text}");
                            // Lists name only what the user may read.
                            if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text) {
                                for i in items {
                                    assert!(
                                        !i.to_string().contains("koalas"),
                                        "{user}: {url} leaks {i}"
                                    );
                                    if *user != "wiki" {
                                        assert!(
                                            !i.to_string().contains("wikipedia"),
                                            "{user}: {url} leaks {i}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 400, "{checked}");
    // Nothing changed.
    assert_eq!(before(&admin), state_before);
}

/// `service.client.https.trustStore*`: the `http` input source trusts a private CA when told
/// to, and refuses the server otherwise. The HTTPS server is Python's, with a certificate
/// generated at run time.
#[test]
fn http_input_over_tls_trusts_the_configured_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, _, cert_pem, key_pem) = tls_material_pem();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &ca_pem).unwrap();
    std::fs::write(dir.path().join("cert.pem"), &cert_pem).unwrap();
    std::fs::write(dir.path().join("key.pem"), &key_pem).unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(
        www.join("rows.json"),
        inline_rows(1_600_000_000_000, 1000, 2),
    )
    .unwrap();
    let script = "import functools, http.server, ssl, sys\n\
d, cert, key = sys.argv[1:4]\n\
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=d)\n\
srv = http.server.HTTPServer(('127.0.0.1', 0), h)\n\
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
ctx.load_cert_chain(cert, key)\n\
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)\n\
print(srv.server_address[1], flush=True)\n\
srv.serve_forever()\n";
    let mut https = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&www)
        .arg(dir.path().join("cert.pem"))
        .arg(dir.path().join("key.pem"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let port = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(https.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim().to_string()
    };
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _https = Kill(https);
    let spec = || {
        let mut spec = inline_spec("https_ds", "", &[], false);
        spec["spec"]["ioConfig"]["inputSource"] =
            json!({"type": "http", "uris": [format!("https://127.0.0.1:{port}/rows.json")]});
        spec
    };
    for (name, trust) in [("trusting", true), ("untrusting", false)] {
        let config = dir.path().join(format!("{name}.properties"));
        let mut props = "service.ingestion.http.allowedHosts=127.0.0.1\n".to_string();
        if trust {
            props.push_str(&format!(
                "service.client.https.trustStoreType=pem\nservice.client.https.trustStorePath={}\n",
                ca.display()
            ));
        }
        std::fs::write(&config, props).unwrap();
        let s = Server::start_with_args(
            &dir.path().join(name),
            &["--config", config.to_str().unwrap()],
        );
        let st = s.run_task(&spec());
        if trust {
            assert_eq!(st["status"], "SUCCESS", "{st}");
            assert_eq!(s.count("https_ds"), Some(2));
        } else {
            assert_eq!(st["status"], "FAILED", "{st}");
        }
    }
}
