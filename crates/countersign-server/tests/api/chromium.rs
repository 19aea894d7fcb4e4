//! Real Chromium, driven through chromedriver (WebDriver) with fantoccini, headless and offline.
//!
//! `.ci/browser.sh` installs Debian's `chromium` and `chromium-driver` and axe-core from npm
//! (`cargo xtask test` runs it first). The paths come from `COUNTERSIGN_CHROMIUM`,
//! `COUNTERSIGN_CHROMEDRIVER` and `COUNTERSIGN_AXE_JS`, defaulting to `/usr/bin/chromium`,
//! `/usr/bin/chromedriver` and the target folder's `browser-tools/`; a missing one fails the test
//! loudly, saying to run `.ci/browser.sh`.
//!
//! Each test gets its own chromedriver and a fresh `--user-data-dir`; one browser runs at a
//! time (they are heavy on a small machine). Screenshots go to the target folder's
//! `browser-artifacts/`.

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// One browser at a time across the tests of this binary.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The target folder (from the `tmp` folder cargo gives integration tests).
fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(PathBuf::from).unwrap_or(tmp)
}

fn tool(variable: &str, default: PathBuf) -> PathBuf {
    let path = std::env::var_os(variable).map_or(default, PathBuf::from);
    assert!(
        path.exists(),
        "`{}` does not exist: run `.ci/browser.sh` (it installs chromium, chromium-driver and axe-core) or set {variable}",
        path.display()
    );
    path
}

/// Where screenshots are saved: `<target>/browser-artifacts/`.
pub fn artifacts_dir() -> PathBuf {
    let dir = target_dir().join("browser-artifacts");
    std::fs::create_dir_all(&dir).expect("the artifacts folder");
    dir
}

/// A chromedriver process and its Chromium session.
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        let chromium = tool("COUNTERSIGN_CHROMIUM", PathBuf::from("/usr/bin/chromium"));
        let chromedriver = tool(
            "COUNTERSIGN_CHROMEDRIVER",
            PathBuf::from("/usr/bin/chromedriver"),
        );
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("an address").port()
        };
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        let probe =
            countersign_http::client(&countersign_http::Trust::nothing()).expect("an HTTP client");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if probe
                .get(format!("{url}/status"))
                .send()
                .await
                .is_ok_and(|response| response.status().is_success())
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().expect("a fresh profile folder");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".to_owned(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&url)
            .await
            .expect("a Chromium session");
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Run `scenario` with a fresh Chromium; the browser is closed whether it passes or panics.
pub async fn in_chromium<F, Fut>(scenario: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _turn = ONE_AT_A_TIME.lock().await;
    let browser = Browser::start().await;
    let outcome = tokio::spawn(scenario(browser.client.clone())).await;
    browser.close().await;
    if let Err(error) = outcome {
        match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("the scenario did not finish: {error}"),
        }
    }
}

/// Save a screenshot as `<target>/browser-artifacts/<name>.png`.
pub async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(artifacts_dir().join(format!("{name}.png")), png).expect("saved");
}

/// The text of the first element matching `css` (waiting up to 10 s for it to appear); a
/// missing one fails with the page's text.
pub async fn text(client: &Client, css: &str) -> String {
    // Waits a little: a form just sent may still be loading its answer.
    let found = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await;
    match found {
        Ok(element) => element.text().await.expect("its text"),
        Err(error) => {
            let page = match client.find(Locator::Css("main")).await {
                Ok(main) => main.text().await.unwrap_or_default(),
                Err(_) => client.source().await.unwrap_or_default(),
            };
            panic!(
                "no `{css}` on {}: {error}\n--- the page ---\n{page}",
                client
                    .current_url()
                    .await
                    .map_or_else(|_| "the page".to_owned(), |url| url.to_string())
            )
        }
    }
}

/// The texts of every element matching `css`.
pub async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in client.find_all(Locator::Css(css)).await.expect("a query") {
        out.push(element.text().await.expect("its text"));
    }
    out
}

/// The path of the page shown now.
pub async fn path(client: &Client) -> String {
    client.current_url().await.expect("a URL").path().to_owned()
}

/// Press one key (a character, or a WebDriver key code such as `'\u{e004}'` for Tab).
pub async fn press(client: &Client, key: char) {
    let actions = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key });
    client
        .perform_actions(actions)
        .await
        .expect("the key is pressed");
}

/// Type `text` on the keyboard, into whatever has focus.
pub async fn type_text(client: &Client, text: &str) {
    let mut actions = KeyActions::new("keyboard".to_owned());
    for character in text.chars() {
        actions = actions
            .then(KeyAction::Down { value: character })
            .then(KeyAction::Up { value: character });
    }
    client
        .perform_actions(actions)
        .await
        .expect("the text is typed");
}

/// The `id` of the element that has focus ("" for none).
pub async fn focused_id(client: &Client) -> String {
    client
        .execute(
            "return document.activeElement ? document.activeElement.id : '';",
            vec![],
        )
        .await
        .expect("a script")
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Press Tab until the element with `id` has focus (at most 60 presses).
pub async fn tab_to(client: &Client, id: &str) {
    for _ in 0..60 {
        if focused_id(client).await == id {
            return;
        }
        press(client, '\u{e004}').await;
    }
    panic!("Tab never reached `#{id}`");
}

/// axe-core's violations of `impact` serious or critical on the page shown now, as
/// `id (impact): help — N nodes` lines.
pub async fn serious_accessibility_violations(client: &Client) -> Vec<String> {
    let axe = tool(
        "COUNTERSIGN_AXE_JS",
        target_dir().join("browser-tools/node_modules/axe-core/axe.min.js"),
    );
    let source = std::fs::read_to_string(&axe).expect("axe.min.js reads");
    // Injected through WebDriver (not subject to the page's CSP), then run on the document.
    let script = format!(
        "{source}\n;const done = arguments[arguments.length - 1];\
         window.axe.run(document, {{ resultTypes: ['violations'] }})\
           .then(r => done(r.violations.map(v => ({{ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }}))))\
           .catch(e => done({{ error: String(e) }}));"
    );
    let result = client
        .execute_async(&script, vec![])
        .await
        .expect("axe runs");
    if let Some(error) = result.get("error") {
        panic!("axe failed: {error}");
    }
    result
        .as_array()
        .expect("a list of violations")
        .iter()
        .filter(|violation| matches!(violation["impact"].as_str(), Some("serious" | "critical")))
        .map(|violation: &Value| {
            format!(
                "{} ({}): {} — {} nodes",
                violation["id"], violation["impact"], violation["help"], violation["nodes"]
            )
        })
        .collect()
}
