//! Forge stage, PURE: the three forges' REST dialects. A [`Dialect`] turns what harness wants
//! (find the open pull request of a branch, open one, comment on it, label it, ask for
//! reviews) into [`Request`]s (method, path with its query, JSON body) and reads the answers
//! into a [`Pr`]. Gitea (and Forgejo) speak `/api/v1`, GitLab `/api/v4` (merge requests),
//! GitHub its REST root; tests/data/forge/ holds the parts of their published API
//! descriptions these requests use, against which the tests check every request.

use serde_json::{json, Value};

use crate::config::ForgeKind;

/// One REST call, before the HTTP layer sends it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path below the API root, with its query string, every part percent-encoded.
    pub path: String,
    /// The JSON body of a `POST`.
    pub body: Option<Value>,
}

/// An open pull (merge) request as harness needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pr {
    /// Its number in the repository (GitLab: the merge request's `iid`).
    pub number: u64,
    /// Its web page.
    pub url: String,
    /// Its description, where harness looks for the run marker.
    pub body: String,
}

/// What a new pull request says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewPr<'a> {
    /// The title (with a forge's draft prefix already, where drafts are made by title).
    pub title: &'a str,
    /// The description.
    pub body: &'a str,
    /// The task branch.
    pub head: &'a str,
    /// The branch it goes into.
    pub base: &'a str,
    /// Whether it is a draft.
    pub draft: bool,
}

/// Pages of open pull requests read when a forge cannot filter them by branch (Gitea).
pub(crate) const MAX_PAGES: u32 = 20;
/// Pull requests per page.
pub(crate) const PAGE_SIZE: u32 = 50;

/// One forge's dialect, bound to one repository.
#[derive(Debug, Clone)]
pub(crate) struct Dialect {
    kind: ForgeKind,
    repo: String,
}

/// Percent-encodes everything but the unreserved characters (RFC 3986).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Dialect {
    /// The dialect of `kind` for `repo` (`owner/name`).
    pub(crate) fn new(kind: ForgeKind, repo: &str) -> Dialect {
        Dialect {
            kind,
            repo: repo.to_string(),
        }
    }

    /// The API root below the configured URL.
    pub(crate) fn api_root(&self, url: &str) -> String {
        match self.kind {
            ForgeKind::Gitea => format!("{url}/api/v1"),
            ForgeKind::Gitlab => format!("{url}/api/v4"),
            ForgeKind::Github => url.to_string(),
        }
    }

    /// The header that carries the token, and its value.
    pub(crate) fn auth_header(&self, token: &str) -> (&'static str, String) {
        match self.kind {
            ForgeKind::Gitea => ("Authorization", format!("token {token}")),
            ForgeKind::Gitlab => ("PRIVATE-TOKEN", token.to_string()),
            ForgeKind::Github => ("Authorization", format!("Bearer {token}")),
        }
    }

    /// `/repos/{owner}/{repo}` (Gitea, GitHub) or `/projects/{id}` (GitLab: the path, encoded).
    fn root(&self) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("/projects/{}", encode(&self.repo)),
            ForgeKind::Gitea | ForgeKind::Github => {
                let (owner, name) = self.repo.split_once('/').unwrap_or((&self.repo, ""));
                format!("/repos/{}/{}", encode(owner), encode(name))
            }
        }
    }

    /// Whether drafts are made by a title prefix (Gitea `WIP:`, GitLab `Draft:`), and which.
    pub(crate) fn draft_prefix(&self) -> Option<&'static str> {
        match self.kind {
            ForgeKind::Gitea => Some("WIP: "),
            ForgeKind::Gitlab => Some("Draft: "),
            ForgeKind::Github => None,
        }
    }

    /// The open pull requests of `head`, page `page` (1-based). GitLab and GitHub filter by
    /// branch; Gitea lists every open one, which [`Dialect::matching`] filters.
    pub(crate) fn find(&self, head: &str, page: u32) -> Request {
        let root = self.root();
        let path = match self.kind {
            ForgeKind::Gitea => {
                format!("{root}/pulls?state=open&page={page}&limit={PAGE_SIZE}")
            }
            ForgeKind::Gitlab => format!(
                "{root}/merge_requests?state=opened&source_branch={}&page={page}&per_page={PAGE_SIZE}",
                encode(head)
            ),
            ForgeKind::Github => {
                let owner = self.repo.split('/').next().unwrap_or_default();
                format!(
                    "{root}/pulls?state=open&head={}&page={page}&per_page={PAGE_SIZE}",
                    encode(&format!("{owner}:{head}"))
                )
            }
        };
        Request {
            method: "GET",
            path,
            body: None,
        }
    }

    /// The pull request of `head` among a page of [`Dialect::find`]'s answer, and whether
    /// the page was full (another may follow).
    pub(crate) fn matching(&self, answer: &Value, head: &str) -> (Option<Pr>, bool) {
        let items = answer.as_array().map(Vec::as_slice).unwrap_or_default();
        let full = items.len() >= PAGE_SIZE as usize;
        let found = items.iter().find_map(|item| {
            let branch = match self.kind {
                ForgeKind::Gitlab => item.get("source_branch"),
                ForgeKind::Gitea | ForgeKind::Github => item.get("head")?.get("ref"),
            };
            (branch?.as_str()? == head).then(|| self.pr(item)).flatten()
        });
        (found, full)
    }

    /// A pull request from an answer (a listed item or a created one).
    pub(crate) fn pr(&self, item: &Value) -> Option<Pr> {
        let (number, url, body) = match self.kind {
            ForgeKind::Gitlab => ("iid", "web_url", "description"),
            ForgeKind::Gitea | ForgeKind::Github => ("number", "html_url", "body"),
        };
        Some(Pr {
            number: item.get(number)?.as_u64()?,
            url: item.get(url)?.as_str()?.to_string(),
            body: item
                .get(body)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// Opens a pull request. `labels` are Gitea label ids or GitLab names (GitHub labels
    /// come after, [`Dialect::labels`]); `reviewer_ids` are GitLab user ids.
    pub(crate) fn create(
        &self,
        new: &NewPr<'_>,
        labels: &[Value],
        reviewer_ids: &[u64],
    ) -> Request {
        let root = self.root();
        let (path, body) = match self.kind {
            ForgeKind::Gitea => {
                let mut body = json!({"title": new.title, "body": new.body, "head": new.head, "base": new.base});
                if !labels.is_empty() {
                    body["labels"] = json!(labels);
                }
                (format!("{root}/pulls"), body)
            }
            ForgeKind::Gitlab => {
                let mut body = json!({
                    "source_branch": new.head,
                    "target_branch": new.base,
                    "title": new.title,
                    "description": new.body,
                });
                if !labels.is_empty() {
                    body["labels"] = json!(labels);
                }
                if !reviewer_ids.is_empty() {
                    body["reviewer_ids"] = json!(reviewer_ids);
                }
                (format!("{root}/merge_requests"), body)
            }
            ForgeKind::Github => (
                format!("{root}/pulls"),
                json!({"title": new.title, "body": new.body, "head": new.head, "base": new.base, "draft": new.draft}),
            ),
        };
        Request {
            method: "POST",
            path,
            body: Some(body),
        }
    }

    /// A comment on pull request `number`.
    pub(crate) fn comment(&self, number: u64, body: &str) -> Request {
        let root = self.root();
        let path = match self.kind {
            ForgeKind::Gitlab => format!("{root}/merge_requests/{number}/notes"),
            ForgeKind::Gitea | ForgeKind::Github => format!("{root}/issues/{number}/comments"),
        };
        Request {
            method: "POST",
            path,
            body: Some(json!({ "body": body })),
        }
    }

    /// Gitea: the repository's labels, page `page`, to turn names into ids.
    pub(crate) fn label_list(&self, page: u32) -> Request {
        Request {
            method: "GET",
            path: format!("{}/labels?page={page}&limit={PAGE_SIZE}", self.root()),
            body: None,
        }
    }

    /// GitLab: the user of a name, to turn reviewer names into ids.
    pub(crate) fn user(&self, name: &str) -> Request {
        Request {
            method: "GET",
            path: format!("/users?username={}", encode(name)),
            body: None,
        }
    }

    /// GitHub: labels added to pull request `number` (its issue), by name.
    pub(crate) fn labels(&self, number: u64, names: &[String]) -> Request {
        Request {
            method: "POST",
            path: format!("{}/issues/{number}/labels", self.root()),
            body: Some(json!({ "labels": names })),
        }
    }

    /// Gitea, GitHub: reviews asked of `names` on pull request `number`.
    pub(crate) fn reviewers(&self, number: u64, names: &[String]) -> Request {
        Request {
            method: "POST",
            path: format!("{}/pulls/{number}/requested_reviewers", self.root()),
            body: Some(json!({ "reviewers": names })),
        }
    }

    /// The kind this dialect speaks.
    pub(crate) fn kind(&self) -> ForgeKind {
        self.kind
    }
}

/// Gitea: the ids of `names` in a page of the label list; the names not found.
pub(crate) fn label_ids(answer: &Value, names: &[String]) -> Vec<(String, u64)> {
    let items = answer.as_array().map(Vec::as_slice).unwrap_or_default();
    names
        .iter()
        .filter_map(|n| {
            let id = items
                .iter()
                .find(|l| l.get("name").and_then(Value::as_str) == Some(n.as_str()))?
                .get("id")?
                .as_u64()?;
            Some((n.clone(), id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn each_forge_finds_the_branch_its_own_way() {
        let g = Dialect::new(ForgeKind::Gitea, "o/r");
        assert_eq!(
            g.find("harness/v-1", 2).path,
            "/repos/o/r/pulls?state=open&page=2&limit=50"
        );
        let l = Dialect::new(ForgeKind::Gitlab, "grp/sub/p");
        assert_eq!(
            l.find("harness/v-1", 1).path,
            "/projects/grp%2Fsub%2Fp/merge_requests?state=opened&source_branch=harness%2Fv-1&page=1&per_page=50"
        );
        let h = Dialect::new(ForgeKind::Github, "o/r");
        assert_eq!(
            h.find("harness/v-1", 1).path,
            "/repos/o/r/pulls?state=open&head=o%3Aharness%2Fv-1&page=1&per_page=50"
        );
    }

    #[test]
    fn a_listed_pull_request_matches_by_its_head_branch() {
        let g = Dialect::new(ForgeKind::Gitea, "o/r");
        let page = json!([
            {"number": 3, "html_url": "u3", "body": "", "head": {"ref": "other"}},
            {"number": 4, "html_url": "u4", "body": "b", "head": {"ref": "harness/v-1"}}
        ]);
        let (pr, full) = g.matching(&page, "harness/v-1");
        assert_eq!(
            pr,
            Some(Pr {
                number: 4,
                url: "u4".into(),
                body: "b".into()
            })
        );
        assert!(!full);
        let l = Dialect::new(ForgeKind::Gitlab, "o/r");
        let page = json!([{"iid": 7, "web_url": "w", "description": null, "source_branch": "b"}]);
        assert_eq!(l.matching(&page, "b").0.map(|p| p.number), Some(7));
    }

    #[test]
    fn gitlab_takes_labels_and_reviewers_in_the_create_call() {
        let l = Dialect::new(ForgeKind::Gitlab, "o/r");
        let new = NewPr {
            title: "Draft: t",
            body: "b",
            head: "h",
            base: "main",
            draft: true,
        };
        let r = l.create(&new, &[json!("bug"), json!("bot")], &[5]);
        assert_eq!(
            r.body,
            Some(
                json!({"source_branch": "h", "target_branch": "main", "title": "Draft: t", "description": "b", "labels": ["bug", "bot"], "reviewer_ids": [5]})
            )
        );
    }

    #[test]
    fn gitea_labels_are_found_by_name() {
        let page = json!([{"id": 1, "name": "bug"}, {"id": 2, "name": "bot"}]);
        assert_eq!(
            label_ids(&page, &["bot".into(), "nope".into()]),
            vec![("bot".to_string(), 2)]
        );
    }
}
