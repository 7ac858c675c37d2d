//! The certificate Secret the loop of [`super::run`] decides on.
//!
//! The loop reads the Secret from its watch, but a Secret the leader writes
//! reaches the watch only later. An event that comes first (the webhook
//! configuration's, after the leader patched its caBundle) must be decided
//! on what was written, not on the Secret it replaced: decided on the old
//! one, the leader would issue a second CA and patch it into the caBundle in
//! place of the CA the Secret serves with, until its write failed with a
//! conflict. A stale watch event can still come after the write; the
//! leader's next write then fails with 409 Conflict at the old
//! resourceVersion (the API server's optimistic concurrency) and the Secret
//! is read again ([`SecretView::reread`]).

use k8s_openapi::api::core::v1::Secret;
use kube_runtime::watcher;

/// What the loop knows of the Secret.
#[derive(Debug, Default)]
pub(super) struct SecretView {
    current: Option<Secret>,
    /// The Secret as a relist finds it, until the relist is done.
    relist: Option<Option<Secret>>,
    synced: bool,
}

impl SecretView {
    /// Takes a watch event.
    pub(super) fn on_watch(&mut self, ev: watcher::Event<Secret>) {
        match ev {
            watcher::Event::Init => self.relist = Some(None),
            watcher::Event::InitApply(s) => self.relist = Some(Some(s)),
            watcher::Event::InitDone => {
                self.current = self.relist.take().flatten();
                self.synced = true;
            }
            watcher::Event::Apply(s) => self.current = Some(s),
            watcher::Event::Delete(_) => self.current = None,
        }
    }

    /// The Secret as the API server returned it after this replica wrote
    /// it: later watch events come after the write.
    pub(super) fn wrote(&mut self, written: Secret) {
        self.current = Some(written);
    }

    /// The Secret read again after a conflict (`None`: there is none).
    pub(super) fn reread(&mut self, secret: Option<Secret>) {
        self.current = secret;
    }

    /// True once the first list is done: before, nothing is decided.
    pub(super) fn synced(&self) -> bool {
        self.synced
    }

    /// The Secret to serve from and decide on.
    pub(super) fn current(&self) -> Option<&Secret> {
        self.current.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::webhook::issue::{Issued, dns_names, issue};
    use crate::controller::webhook::managed::{material, secret_data};
    use crate::controller::webhook::rotation::{Policy, Reason, Verdict, decide};

    const NOW: i64 = 1_800_000_000;
    const NAME: &str = "muster-webhook.muster-system.svc";

    fn issued(service: &str) -> Issued {
        let names = dns_names(service, "muster-system");
        issue(None, true, names, "ca", &Policy::default(), NOW).expect("issued")
    }

    fn secret(i: &Issued, resource_version: &str) -> Secret {
        let mut s = Secret {
            data: Some(secret_data(i)),
            ..Secret::default()
        };
        s.metadata.resource_version = Some(resource_version.to_string());
        s
    }

    /// True when deciding on the view leaves the Secret as it is.
    fn keeps(view: &SecretView) -> bool {
        let m = view.current().map(material);
        matches!(
            decide(m.as_ref(), NAME, &Policy::default(), NOW),
            Verdict::Keep { .. }
        )
    }

    fn synced_on(s: Option<Secret>) -> SecretView {
        let mut view = SecretView::default();
        view.on_watch(watcher::Event::Init);
        if let Some(s) = s {
            view.on_watch(watcher::Event::InitApply(s));
        }
        assert!(!view.synced(), "synced before the list is done");
        view.on_watch(watcher::Event::InitDone);
        assert!(view.synced());
        view
    }

    #[test]
    fn a_write_is_decided_on_before_the_watch_delivers_it() {
        let mut view = synced_on(None);
        let m = view.current().map(material);
        assert_eq!(
            decide(m.as_ref(), NAME, &Policy::default(), NOW),
            Verdict::Issue {
                reason: Reason::Missing,
                new_ca: true
            }
        );
        // the leader wrote a Secret; the configuration's watch event (its
        // caBundle patch) comes before the Secret's: nothing to issue
        view.wrote(secret(&issued("muster-webhook"), "2"));
        assert!(keeps(&view), "a second CA would be issued");
        // then the watch delivers the write
        view.on_watch(watcher::Event::Apply(secret(
            &issued("muster-webhook"),
            "2",
        )));
        assert!(keeps(&view));
    }

    #[test]
    fn a_stale_event_after_a_write_is_mended_by_the_reread() {
        // the Secret serves another Service's name: a new certificate is due
        let old = secret(&issued("other"), "1");
        let mut view = synced_on(Some(old.clone()));
        assert!(!keeps(&view));
        let written = secret(&issued("muster-webhook"), "2");
        view.wrote(written.clone());
        assert!(keeps(&view));
        // a stale event carries the replaced Secret: the leader decides on
        // it, its write at resourceVersion 1 fails with 409, and it reads
        // the Secret again
        view.on_watch(watcher::Event::Apply(old));
        assert!(!keeps(&view));
        view.reread(Some(written));
        assert!(keeps(&view));
        assert_eq!(
            view.current()
                .and_then(|s| s.metadata.resource_version.as_deref()),
            Some("2")
        );
    }

    #[test]
    fn a_relist_replaces_what_was_known_and_a_delete_forgets_it() {
        let mut view = synced_on(Some(secret(&issued("muster-webhook"), "3")));
        assert!(keeps(&view));
        view.on_watch(watcher::Event::Delete(secret(
            &issued("muster-webhook"),
            "3",
        )));
        assert!(view.current().is_none());
        // a relist that finds no Secret leaves none, once it is done
        view.wrote(secret(&issued("muster-webhook"), "4"));
        view.on_watch(watcher::Event::Init);
        assert!(view.current().is_some(), "dropped before the relist ended");
        view.on_watch(watcher::Event::InitDone);
        assert!(view.current().is_none());
    }
}
