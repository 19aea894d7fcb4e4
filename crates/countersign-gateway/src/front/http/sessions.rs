//! A handshake-era session's life on the HTTP front: opened by `initialize` (and kept only once
//! the upstream accepted the handshake), its messages routed to the POST or GET stream they
//! belong to, and ended by `DELETE`, its upstream closing, or a handshake nobody can use.

use std::sync::{Arc, Mutex};

use countersign::Principal;
use hyper::StatusCode;
use tokio::sync::{Notify, mpsc};

use super::responses::refuse;
use super::{Front, HttpSession, Refused, Routes, is_final_reply, lock};
use crate::codes;
use crate::session::{Outgoing, Session};
use crate::wire::{self, Kind};

impl Front {
    /// Open a session for `principal`: a handshake-era one (named by a fresh `Mcp-Session-Id`),
    /// or, with `modern_key`, the principal's 2026-07-28 session.
    pub(super) fn open_session(
        self: &Arc<Self>,
        principal: Principal,
        modern_key: Option<String>,
    ) -> Result<(String, Arc<HttpSession>), Refused> {
        if lock(&self.sessions).len() + lock(&self.modern).len() >= self.config.max_sessions {
            return Err(Box::new(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::INTERNAL_ERROR,
                "too many sessions: end one with DELETE, or ask the operator to raise --max-sessions",
            )));
        }
        let connected =
            (self.upstream)().and_then(|upstream| crate::connect(&self.shared, upstream));
        let (link, events) = match connected {
            Ok(connected) => connected,
            Err(error) => {
                self.log(format_args!("cannot open a session: {error}"));
                return Err(Box::new(refuse(
                    StatusCode::BAD_GATEWAY,
                    codes::INTERNAL_ERROR,
                    &format!("the upstream cannot be reached: {error}"),
                )));
            }
        };
        let (session, outgoing) = Session::start(
            Arc::clone(&self.shared),
            Some(principal.clone()),
            principal.as_str(),
            link,
            events,
        );
        let routes = Arc::new(Mutex::new(Routes::default()));
        tokio::spawn(route(outgoing, Arc::clone(&routes)));
        let id = format!("{:032x}", rand::random::<u128>());
        let http_session = Arc::new(HttpSession {
            session: session.clone(),
            principal,
            routes,
            ended: Arc::new(Notify::new()),
            protocol_version: Mutex::new(None),
        });
        match &modern_key {
            Some(key) => lock(&self.modern).insert(key.clone(), Arc::clone(&http_session)),
            None => lock(&self.sessions).insert(id.clone(), Arc::clone(&http_session)),
        };
        // The session ends when its upstream closes or the client deletes it; dropping the
        // last handle closes the upstream connection (a child process is killed).
        let front = Arc::downgrade(self);
        let ended = Arc::clone(&http_session.ended);
        let watched = id.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = session.upstream_closed() => {}
                _ = ended.notified() => {}
            }
            if let Some(front) = front.upgrade() {
                match modern_key {
                    Some(key) => lock(&front.modern).remove(&key),
                    None => lock(&front.sessions).remove(&watched),
                };
            }
        });
        Ok((id, http_session))
    }

    /// End the handshake-era session `id`: it is forgotten (its `--max-sessions` slot is free
    /// at once) and its upstream is ended as a client should end it, in the background.
    pub(super) fn end_session(&self, id: &str, session: &Arc<HttpSession>) {
        lock(&self.sessions).remove(id);
        session.ended.notify_one();
        let session = Arc::clone(session);
        // Also called from a drop: a runtime shutting down ends the upstream its own way.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { session.session.close_upstream().await });
        }
    }
}

/// A handshake-era session being opened by its `initialize`: ended when dropped before the
/// upstream accepted the handshake (the client gave up waiting, the handshake was refused or
/// timed out), so that it holds no `--max-sessions` slot nobody can use.
pub(super) struct Opening {
    pub(super) front: Arc<Front>,
    pub(super) id: String,
    pub(super) session: Arc<HttpSession>,
    pub(super) accepted: bool,
}

impl Drop for Opening {
    fn drop(&mut self) {
        if !self.accepted {
            self.front.end_session(&self.id, &self.session);
        }
    }
}

/// Deliver a session's messages: to the POST of the request each belongs to (its stream ends
/// after the reply), else (requests and notifications only) to the GET stream, else nowhere.
pub(super) async fn route(
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
    routes: Arc<Mutex<Routes>>,
) {
    while let Some(Outgoing { message, related }) = outgoing.recv().await {
        let mut routes = lock(&routes);
        if let Some(related) = related.map(|id| id.to_string())
            && let Some(post) = routes.posts.get(&related)
        {
            let done = is_final_reply(&message, &related);
            // A closed POST stream (the client went away) takes nothing more.
            if post.send(message).is_err() || done {
                routes.posts.remove(&related);
            }
            continue;
        }
        if wire::kind(&message) == Kind::Response {
            // The reply to a request whose POST is gone (the client disconnected): a reply
            // never travels on the GET stream.
            continue;
        }
        if let Some(listening) = &routes.listening
            && listening.send(message).is_err()
        {
            routes.listening = None;
        }
    }
}
