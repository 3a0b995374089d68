//! A session's MCP roots: the directories its client works in, which bound the files a
//! `run_prompt` call may name (see [`crate::files`]).
//!
//! The roots are listed (`roots/list`) on the first call of a session that names a file,
//! kept for the session, and listed again after the client's
//! `notifications/roots/list_changed`. SEP-2577 deprecates roots in the 2026-07-28 revision,
//! which also forbids server-to-client requests, and rmcp marks them `#[deprecated]`; they
//! are still served on handshake-era connections, so this module (and only this one) allows
//! the deprecation.
#![allow(
    deprecated,
    reason = "MCP roots are deprecated by SEP-2577 but still served"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::Root;
use rmcp::service::RequestContext;

use crate::files::{self, ClientRoots};

/// The most roots kept per session: a client listing more has the rest ignored (logged).
pub const MAX_ROOTS: usize = 64;

/// How long the client may take to answer `roots/list`.
pub const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// One session's roots as its client last listed them.
///
/// The lock is held across a listing, so concurrent calls list once, and a change notified
/// meanwhile clears the list after it, never before.
#[derive(Debug, Default)]
pub struct SessionRoots {
    listed: tokio::sync::Mutex<Option<Arc<[PathBuf]>>>,
}

impl SessionRoots {
    /// The roots a call of this session is bounded by: `Undeclared` when the client
    /// declares no `roots` capability or the exchange is `modern` (2026-07-28, where the
    /// server cannot ask), else the listed roots (listed now unless kept).
    pub async fn of(&self, context: &RequestContext<RoleServer>, modern: bool) -> ClientRoots {
        let declared = context
            .client_capabilities()
            .is_some_and(|c| c.roots.is_some());
        if !declared || modern {
            return ClientRoots::Undeclared;
        }
        let mut listed = self.listed.lock().await;
        if let Some(roots) = &*listed {
            return ClientRoots::Listed(Arc::clone(roots));
        }
        match tokio::time::timeout(ROOTS_TIMEOUT, context.peer.list_roots()).await {
            Ok(Ok(result)) => {
                let roots: Arc<[PathBuf]> = resolve(&result.roots).into();
                tracing::debug!(roots = ?roots, "the client listed its roots");
                *listed = Some(Arc::clone(&roots));
                ClientRoots::Listed(roots)
            }
            Ok(Err(e)) => ClientRoots::Unavailable(format!("roots/list failed: {e}")),
            Err(_) => ClientRoots::Unavailable(format!(
                "roots/list got no answer within {ROOTS_TIMEOUT:?}"
            )),
        }
    }

    /// The client's roots changed: the next call that names a file lists them again.
    pub async fn changed(&self) {
        *self.listed.lock().await = None;
        tracing::debug!("the client's roots changed: they are listed again on the next file call");
    }
}

/// The client's roots, resolved: at most [`MAX_ROOTS`] `file://` roots that exist here,
/// each resolved (links, `..`) the way a call's path is.
fn resolve(roots: &[Root]) -> Vec<PathBuf> {
    if roots.len() > MAX_ROOTS {
        tracing::warn!(
            "the client lists {} roots; the first {MAX_ROOTS} are used",
            roots.len()
        );
    }
    roots
        .iter()
        .take(MAX_ROOTS)
        .filter_map(|root| {
            let Some(path) = files::root_path(&root.uri) else {
                tracing::warn!(uri = %root.uri, "a root that is not a local file:// URI is ignored");
                return None;
            };
            match std::fs::canonicalize(&path) {
                Ok(resolved) => Some(resolved),
                Err(e) => {
                    tracing::debug!(root = %path.display(), "a root that does not resolve here is ignored: {e}");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn roots_are_resolved_bounded_and_local() {
        let dir = tempfile::tempdir().unwrap();
        let uri = url::Url::from_directory_path(dir.path())
            .unwrap()
            .to_string();
        let mut listed = vec![
            Root::new("https://example.com/repo"),
            Root::new("file:///nonexistent-pf-root"),
        ];
        listed.extend((0..MAX_ROOTS + 5).map(|_| Root::new(uri.clone())));
        let roots = resolve(&listed);
        assert_eq!(roots.len(), MAX_ROOTS - 2, "{roots:?}");
        assert!(
            roots
                .iter()
                .all(|r| *r == dir.path().canonicalize().unwrap())
        );
    }
}
