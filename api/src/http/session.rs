//! The UI's sign-in session. Flowise's UI signs in once with a weir API key (typed
//! as the password) and then sends no `Authorization` header: its calls carry a
//! cookie and `x-request-from: internal`.
//!
//! The cookie holds the key's hash and an expiry, sealed with the server's key
//! (AES-256-GCM, [`crate::sealing`]): it reveals nothing, cannot be forged or made
//! to last longer, and every request looks its key up again, so revoking the key
//! ends its sessions at once. It is `HttpOnly` and `SameSite=Strict` (and `Secure`
//! when the UI is reached over HTTPS), and it counts
//! only on a request that carries `x-request-from: internal` — a header no other
//! origin's page may send (it is not among the CORS allowed headers, so a browser's
//! preflight fails, and weir never allows credentials across origins) — and whose
//! `Origin` and `Sec-Fetch-Site`, when the browser sends them, say it comes from
//! this server's own pages.

use std::time::Duration;

use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};

use crate::domain::time;
use crate::sealing::Keyring;

/// The cookie's name.
pub const COOKIE_NAME: &str = "weir_session";

/// The sealing context: a value sealed for anything else does not open as a session.
const CONTEXT: &str = "weir-ui-session";

/// Why a presented session does not count.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionError {
    /// Past its expiry: the user signs in again.
    Expired,
    /// Not a session this server sealed (tampered, or sealed under a key it lost).
    Invalid,
}

/// A new session for the key with hash `key_hash`: the cookie's value.
pub fn issue(keyring: &Keyring, key_hash: &str, ttl: Duration) -> Result<String, String> {
    let expires = time::now().timestamp() + i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2);
    let sealed = keyring.seal(format!("{key_hash}|{expires}").as_bytes(), CONTEXT)?;
    Ok(format!("{}.{}", sealed.key_id, sealed.data))
}

/// The hash of the key a session stands for, if it is one this server issued and
/// it has not expired.
pub fn open(keyring: &Keyring, value: &str) -> Result<String, SessionError> {
    let (key_id, data) = value.split_once('.').ok_or(SessionError::Invalid)?;
    let plain = keyring
        .open(key_id, data, CONTEXT)
        .map_err(|_| SessionError::Invalid)?;
    let plain = String::from_utf8(plain).map_err(|_| SessionError::Invalid)?;
    let (hash, expires) = plain.split_once('|').ok_or(SessionError::Invalid)?;
    let expires: i64 = expires.parse().map_err(|_| SessionError::Invalid)?;
    if time::now().timestamp() >= expires {
        return Err(SessionError::Expired);
    }
    Ok(hash.to_owned())
}

/// The `Set-Cookie` value that stores a session for `ttl`; `secure` when the UI is
/// served over HTTPS ([`over_https`]), so the browser never sends it in clear.
pub fn set_cookie(value: &str, ttl: Duration, secure: bool) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        ttl.as_secs()
    ))
    .ok()
}

/// Whether the browser reached weir over HTTPS: its page's `Origin` is `https://`
/// (a browser sends it with every sign-in, a POST), a proxy weir trusts
/// (`TRUST_PROXY`) says `X-Forwarded-Proto: https`, or `PUBLIC_URL` is HTTPS. A
/// wrong "yes" only makes the cookie stricter.
pub fn over_https(headers: &HeaderMap, trust_proxy: bool, public_url: Option<&str>) -> bool {
    let https = |value: Option<&HeaderValue>, prefix: &[u8]| {
        value.is_some_and(|v| {
            v.as_bytes().len() >= prefix.len()
                && v.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix)
        })
    };
    https(headers.get(ORIGIN), b"https://")
        || (trust_proxy && https(headers.get("x-forwarded-proto"), b"https"))
        || public_url.is_some_and(|url| url.starts_with("https://"))
}

/// The `Set-Cookie` value that removes the session.
pub fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("weir_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")
}

/// Whether the request says it comes from weir's own UI (`x-request-from: internal`).
pub fn from_ui(headers: &HeaderMap) -> bool {
    headers
        .get("x-request-from")
        .is_some_and(|v| v.as_bytes() == b"internal")
}

/// The session cookie's value, when the request may use one: it comes from the UI
/// and from this server's own origin.
pub fn presented(parts: &Parts) -> Option<&str> {
    if !from_ui(&parts.headers) || !same_origin(&parts.headers) {
        return None;
    }
    cookie(&parts.headers, COOKIE_NAME)
}

/// False when the browser says the request comes from another site or origin:
/// `Sec-Fetch-Site` other than `same-origin` (or `none`, typed by the user), or an
/// `Origin` whose host is not the `Host` asked for.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return false;
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let host = headers.get(HOST).map(HeaderValue::as_bytes);
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority.as_bytes());
    origin_host.is_some() && origin_host == host
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring() -> Keyring {
        Keyring::with_key([7; 32])
    }

    #[test]
    fn a_session_opens_to_its_key_until_it_expires() {
        let ring = keyring();
        let value = issue(&ring, "abc123", Duration::from_secs(60)).unwrap_or_default();
        assert_eq!(open(&ring, &value), Ok("abc123".to_owned()));
        let expired = issue(&ring, "abc123", Duration::ZERO).unwrap_or_default();
        assert_eq!(open(&ring, &expired), Err(SessionError::Expired));
    }

    #[test]
    fn a_tampered_or_foreign_session_does_not_open() {
        let ring = keyring();
        let value = issue(&ring, "abc123", Duration::from_secs(60)).unwrap_or_default();
        let mut tampered = value.clone().into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap_or_default();
        assert_eq!(open(&ring, &tampered), Err(SessionError::Invalid));
        assert_eq!(
            open(&Keyring::with_key([8; 32]), &value),
            Err(SessionError::Invalid)
        );
        // A value sealed for another purpose is not a session.
        let other = ring.seal(b"abc123|99999999999", "credential").ok();
        let other = other.map(|s| format!("{}.{}", s.key_id, s.data));
        assert_eq!(
            open(&ring, other.as_deref().unwrap_or("")),
            Err(SessionError::Invalid)
        );
    }

    fn headers(pairs: &[(&'static str, &str)]) -> Parts {
        let mut req = axum::http::Request::builder().uri("/api/v1/chatflows");
        for (name, value) in pairs {
            req = req.header(*name, *value);
        }
        req.body(())
            .map(|r| r.into_parts().0)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_cookie_counts_only_from_the_ui_on_this_origin() {
        let ui = [
            ("x-request-from", "internal"),
            ("cookie", "theme=dark; weir_session=abc.def"),
            ("host", "localhost:3000"),
        ];
        assert_eq!(presented(&headers(&ui)), Some("abc.def"));
        assert_eq!(presented(&headers(&ui[1..])), None);
        let with = |extra: (&'static str, &'static str)| {
            let mut all = ui.to_vec();
            all.push(extra);
            presented(&headers(&all)).is_some()
        };
        assert!(with(("origin", "http://localhost:3000")));
        assert!(with(("sec-fetch-site", "same-origin")));
        assert!(!with(("origin", "http://localhost:3001")));
        assert!(!with(("origin", "null")));
        assert!(!with(("sec-fetch-site", "same-site")));
        assert!(!with(("sec-fetch-site", "cross-site")));
    }

    #[test]
    fn the_cookie_is_secure_when_the_ui_is_reached_over_https() {
        let over = |pairs: &[(&'static str, &str)], trust: bool, public: Option<&str>| {
            over_https(&headers(pairs).headers, trust, public)
        };
        assert!(over(&[("origin", "https://weir.example")], false, None));
        assert!(over(&[("origin", "HTTPS://weir.example")], false, None));
        assert!(!over(&[("origin", "http://localhost:3000")], false, None));
        assert!(!over(&[], false, None));
        assert!(over(&[("x-forwarded-proto", "https")], true, None));
        assert!(!over(&[("x-forwarded-proto", "https")], false, None));
        assert!(over(&[], false, Some("https://weir.example")));
        assert!(!over(&[], false, Some("http://weir.example")));
        let cookie = |secure| set_cookie("v", Duration::from_secs(60), secure);
        let secure = cookie(true).map(|c| c.to_str().unwrap_or_default().to_owned());
        assert!(secure.is_some_and(|c| c.ends_with("; SameSite=Strict; Secure")));
        let plain = cookie(false).map(|c| c.to_str().unwrap_or_default().to_owned());
        assert!(plain.is_some_and(|c| !c.contains("Secure")));
    }
}
