//! `serve --notify-config FILE`: webhooks and Slack in a file instead of flags (issue #17).
//!
//! ```yaml
//! webhooks:
//!   - url: http://127.0.0.1:9000/countersign
//!     secret_file: hook.secret          # relative to this file's folder
//! slack:
//!   channel: C0123456789
//!   token_file: slack.token
//!   signing_secret_file: slack.secret
//!   api_url: https://slack.com/api     # optional
//!   users:                              # Slack user id: approver
//!     U024BE7LH: human:alice
//! ca_file: corp-ca.pem                  # optional: trust only these CAs for https://
//! ```
//!
//! Unknown and duplicate keys are refused, naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use countersign_server::slack::{self, SlackConfig};
use countersign_server::webhook::WebhookEndpoint;
use serde::Deserialize;

use crate::Failure;

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyFile {
    #[serde(default)]
    webhooks: Vec<WebhookEntry>,
    slack: Option<SlackEntry>,
    /// A PEM file of the certificate authorities https:// webhooks and Slack must chain to.
    ca_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookEntry {
    url: String,
    secret_file: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlackEntry {
    channel: String,
    token_file: PathBuf,
    signing_secret_file: PathBuf,
    api_url: Option<String>,
    users: BTreeMap<String, String>,
}

/// What a notify file configures.
pub(super) struct FromFile {
    pub(super) webhooks: Vec<WebhookEndpoint>,
    pub(super) slack: Option<SlackConfig>,
    /// `ca_file`, relative to the file's folder.
    pub(super) ca_file: Option<PathBuf>,
}

/// Read and check `path`.
pub(super) fn load(path: &Path) -> Result<FromFile, Failure> {
    let shown = path.display().to_string();
    let text = super::read_file("--notify-config", path)?;
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    let file: NotifyFile =
        serde_saphyr::from_str_with_options(&text, options).map_err(|error| {
            // The reader's message ends with a drawing of the line; the first line says it all.
            let text = error.to_string();
            let first = text.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            Failure(format!("`{shown}` is not a notify configuration: {first}"))
        })?;
    let folder = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut webhooks = Vec::new();
    for entry in file.webhooks {
        let secret_file = folder.join(&entry.secret_file);
        webhooks.push(super::webhook_endpoint(&entry.url, &secret_file)?);
    }
    let slack = match file.slack {
        None => None,
        Some(entry) => {
            let users = entry
                .users
                .into_iter()
                .map(|(user, approver)| format!("{user}: {approver}\n"))
                .collect::<String>();
            let users = SlackConfig::parse_users(&users, &format!("{shown}, `slack.users`"))?;
            Some(SlackConfig::new(
                entry.api_url.as_deref().unwrap_or(slack::DEFAULT_API_URL),
                &super::read_file("`slack.token_file`", &folder.join(&entry.token_file))?,
                &super::read_file(
                    "`slack.signing_secret_file`",
                    &folder.join(&entry.signing_secret_file),
                )?,
                &entry.channel,
                users,
            )?)
        }
    };
    Ok(FromFile {
        webhooks,
        slack,
        ca_file: file.ca_file.map(|ca_file| folder.join(ca_file)),
    })
}
