//! The species' forge, through the REST API GitHub documents: a repository
//! (to try a token), pull requests (create; the open one of a branch), and
//! comments on them. The token travels in the `Authorization` header alone.
//!
//! Where: the repository is the species' remote (`TENERAL_UPSTREAM`'s,
//! `origin` by default); its owner and name are the last two parts of its
//! address. The API is `https://api.github.com` for a repository on
//! github.com, else what `TENERAL_FORGE_API` in `.env` names (GitHub
//! Enterprise's `https://<host>/api/v3`, or a stand-in).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::token::Token;

/// Where the species lives and its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Species {
    /// The remote's address, for git.
    pub url: String,
    /// The branch offers are made against (`main`).
    pub branch: String,
    pub api: String,
    pub owner: String,
    pub repo: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("the species has no remote to publish to ({0}); set TENERAL_UPSTREAM=<remote>/<branch> in .env")]
    NoRemote(String),
    #[error("the species' address {0:?} does not end in <owner>/<repository>")]
    BadUrl(String),
    #[error(
        "the species is not on github.com ({0}); name its API with TENERAL_FORGE_API=<url> in .env"
    )]
    NoApi(String),
    #[error("the forge at {url} cannot be reached: {why}")]
    Unreachable { url: String, why: String },
    #[error("the forge refused the token ({status}): {message}; make a fine-grained token for the species' repository alone with Contents and Pull requests read and write, then teneralctl offer token")]
    Refused { status: u16, message: String },
    #[error("the forge answered {status} to {what}: {message}")]
    Answer { what: &'static str, status: u16, message: String },
    #[error(transparent)]
    Settings(#[from] teneral_core::dotenv::SettingsError),
}

/// Owner and repository from a remote's address (`https://host/o/r.git`,
/// `git@host:o/r.git`).
pub fn owner_repo(url: &str) -> Option<(String, String)> {
    let path = url.trim_end_matches('/').trim_end_matches(".git");
    let path = path.rsplit_once("://").map_or(path, |(_, rest)| rest);
    let mut parts = path.rsplit(['/', ':']);
    let repo = parts.next().filter(|s| !s.is_empty())?;
    let owner = parts.next().filter(|s| !s.is_empty() && !s.contains('@'))?;
    Some((owner.to_owned(), repo.to_owned()))
}

/// The species of the individual at `home`, from `.env` and its git remotes.
pub fn species(home: &Path) -> Result<Species, ForgeError> {
    let get = |name: &str| teneral_core::dotenv::value_in(home, name);
    let upstream = get("TENERAL_UPSTREAM")?.unwrap_or_else(|| "origin/main".to_owned());
    // A local branch as the species: its namesake on `origin`.
    let (remote, branch) = upstream.split_once('/').unwrap_or(("origin", upstream.as_str()));
    let url = git2::Repository::open(home)
        .and_then(|r| r.find_remote(remote).map(|r| r.url().map(str::to_owned)))
        .ok()
        .flatten()
        .ok_or_else(|| ForgeError::NoRemote(format!("no remote {remote:?}")))?;
    let (owner, repo) = owner_repo(&url).ok_or_else(|| ForgeError::BadUrl(url.clone()))?;
    let api = match get("TENERAL_FORGE_API")? {
        Some(api) => api.trim_end_matches('/').to_owned(),
        None if url.contains("github.com") => "https://api.github.com".to_owned(),
        None => return Err(ForgeError::NoApi(url)),
    };
    Ok(Species { url, branch: branch.to_owned(), api, owner, repo })
}

/// A pull request, as far as an offer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub number: u64,
    pub url: String,
}

/// The API of one species' repository, with the owner's token.
pub struct Forge<'a> {
    species: &'a Species,
    token: &'a Token,
    client: reqwest::blocking::Client,
}

fn message(body: &Value, text: &str) -> String {
    let mut m = body["message"].as_str().unwrap_or(text).chars().take(300).collect::<String>();
    if let Some(errors) = body["errors"].as_array() {
        for e in errors {
            if let Some(more) = e["message"].as_str() {
                m.push_str(": ");
                m.push_str(more);
            }
        }
    }
    m
}

impl<'a> Forge<'a> {
    pub fn new(species: &'a Species, token: &'a Token) -> Result<Forge<'a>, ForgeError> {
        let client = reqwest::blocking::Client::builder()
            .user_agent(concat!("teneral/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| ForgeError::Unreachable {
                url: species.api.clone(),
                why: e.to_string(),
            })?;
        Ok(Forge { species, token, client })
    }

    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ForgeError> {
        let url = format!(
            "{}/repos/{}/{}{path}",
            self.species.api, self.species.owner, self.species.repo
        );
        let mut request = self
            .client
            .request(method, &url)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header("Authorization", format!("Bearer {}", self.token.expose()));
        if let Some(body) = body {
            request = request.header("Content-Type", "application/json").body(body.to_string());
        }
        let response = request.send().map_err(|e| ForgeError::Unreachable {
            url: url.clone(),
            why: e.without_url().to_string(),
        })?;
        let status = response.status().as_u16();
        let text = response.text().unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// Tries the token once against the repository: it must see it and may push.
    pub fn try_token(&self) -> Result<(), ForgeError> {
        let (status, body) = self.send(reqwest::Method::GET, "", None)?;
        match status {
            200 if body["permissions"]["push"] == false => Err(ForgeError::Refused {
                status,
                message: "the token may read the repository but not push to it".into(),
            }),
            200 => Ok(()),
            401 | 403 | 404 => Err(ForgeError::Refused { status, message: message(&body, "") }),
            _ => Err(ForgeError::Answer {
                what: "the repository",
                status,
                message: message(&body, ""),
            }),
        }
    }

    /// Opens a pull request of `head` (a branch of the species' repository)
    /// against the species' branch; the open one of `head` when the forge
    /// says one already exists (422).
    pub fn open_pull(&self, head: &str, title: &str, text: &str) -> Result<Pull, ForgeError> {
        let request =
            json!({"title": title, "head": head, "base": self.species.branch, "body": text});
        let (status, body) = self.send(reqwest::Method::POST, "/pulls", Some(&request))?;
        match status {
            201 => pull_of(&body).ok_or(ForgeError::Answer {
                what: "the new pull request",
                status,
                message: "no number or html_url in the answer".into(),
            }),
            422 if message(&body, "").contains("already exists") => {
                self.open_pull_of(head)?.ok_or(ForgeError::Answer {
                    what: "the pull request that already exists",
                    status,
                    message: format!("none is open for {head}"),
                })
            }
            401 | 403 => Err(ForgeError::Refused { status, message: message(&body, "") }),
            _ => Err(ForgeError::Answer {
                what: "opening the pull request",
                status,
                message: message(&body, ""),
            }),
        }
    }

    /// The open pull request of the branch `head`, if any.
    pub fn open_pull_of(&self, head: &str) -> Result<Option<Pull>, ForgeError> {
        let query = format!("/pulls?state=open&head={}:{head}", self.species.owner);
        let (status, body) = self.send(reqwest::Method::GET, &query, None)?;
        if status != 200 {
            return Err(ForgeError::Answer {
                what: "the list of pull requests",
                status,
                message: message(&body, ""),
            });
        }
        Ok(body.as_array().and_then(|a| a.first()).and_then(pull_of))
    }

    /// Pull request `number`: its head commit, its base branch, whether it is open.
    pub fn pull(&self, number: u64) -> Result<(String, String, bool), ForgeError> {
        let (status, body) = self.send(reqwest::Method::GET, &format!("/pulls/{number}"), None)?;
        if status != 200 {
            return Err(ForgeError::Answer {
                what: "the pull request",
                status,
                message: message(&body, ""),
            });
        }
        let head = body["head"]["sha"].as_str().unwrap_or_default().to_owned();
        let base = body["base"]["ref"].as_str().unwrap_or_default().to_owned();
        Ok((head, base, body["state"] == "open"))
    }

    /// Posts `text` as a comment on pull request `number`; its address.
    pub fn comment(&self, number: u64, text: &str) -> Result<String, ForgeError> {
        let path = format!("/issues/{number}/comments");
        let (status, body) =
            self.send(reqwest::Method::POST, &path, Some(&json!({"body": text})))?;
        match status {
            201 => Ok(body["html_url"].as_str().unwrap_or_default().to_owned()),
            _ => {
                Err(ForgeError::Answer { what: "the comment", status, message: message(&body, "") })
            }
        }
    }
}

fn pull_of(body: &Value) -> Option<Pull> {
    Some(Pull { number: body["number"].as_u64()?, url: body["html_url"].as_str()?.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_and_repository_of_an_address() {
        let table = [
            ("https://github.com/teneral/teneral.git", Some(("teneral", "teneral"))),
            ("https://github.com/teneral/teneral/", Some(("teneral", "teneral"))),
            ("git@github.com:o/r.git", Some(("o", "r"))),
            ("http://127.0.0.1:8080/o/species.git", Some(("o", "species"))),
            ("https://github.com/", None),
            ("/srv/species", Some(("srv", "species"))),
        ];
        for (url, want) in table {
            let want = want.map(|(a, b)| (a.to_owned(), b.to_owned()));
            assert_eq!(owner_repo(url), want, "{url}");
        }
    }
}
