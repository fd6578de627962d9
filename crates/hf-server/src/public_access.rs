//! How users reach the service: its public URL and the reverse proxies in front of it.
//!
//! In a real deployment TLS usually ends at a proxy, so hf sees plain HTTP from the proxy's
//! address. Two settings tell it the truth:
//! - `HF_PUBLIC_URL`, the address users type. When it is `https`, browsers reach hf over TLS,
//!   so the `hf_runtime` cookie carries `Secure` whatever the last hop was.
//! - `HF_TRUSTED_PROXIES`, the addresses (or CIDR ranges) of those proxies. Only a request whose
//!   TCP peer is one of them has its `X-Forwarded-For` and `X-Forwarded-Proto` believed; from
//!   anyone else these headers are ignored, since any client can send them.

use std::net::IpAddr;

use actix_web::HttpRequest;
use ipnet::IpNet;

/// The public URL and the trusted proxies; by default neither (hf is reached directly).
#[derive(Debug, Clone, Default)]
pub struct PublicAccess {
    https: bool,
    trusted_proxies: Vec<IpNet>,
}

/// A setting that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `HF_PUBLIC_URL` is not an `http://` or `https://` URL with a host.
    #[error("HF_PUBLIC_URL `{0}` is not an http:// or https:// URL with a host")]
    PublicUrl(String),
    /// An entry of `HF_TRUSTED_PROXIES` is neither an IP address nor a CIDR range.
    #[error("HF_TRUSTED_PROXIES entry `{0}` is neither an IP address nor a CIDR range")]
    Proxy(String),
}

impl PublicAccess {
    /// Reads the settings: the public URL (if any) and the trusted proxies, each an address
    /// (`10.0.0.5`, `::1`) or a range (`10.0.0.0/8`).
    pub fn new(public_url: Option<&str>, trusted_proxies: &[String]) -> Result<Self, Error> {
        let https = match public_url.map(str::trim).filter(|url| !url.is_empty()) {
            None => false,
            Some(url) => {
                let lower = url.to_ascii_lowercase();
                let (https, rest) = match (
                    lower.strip_prefix("https://"),
                    lower.strip_prefix("http://"),
                ) {
                    (Some(rest), _) => (true, rest),
                    (None, Some(rest)) => (false, rest),
                    (None, None) => return Err(Error::PublicUrl(url.to_owned())),
                };
                if rest.split(['/', '?', '#']).next().unwrap_or("").is_empty() {
                    return Err(Error::PublicUrl(url.to_owned()));
                }
                https
            }
        };
        let trusted_proxies = trusted_proxies
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| Error::Proxy(entry.to_owned()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            https,
            trusted_proxies,
        })
    }

    fn is_trusted(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.trusted_proxies
            .iter()
            .any(|range| range.contains(&address))
    }

    /// Whether the browser reached this request over TLS: the public URL is https, the
    /// connection itself is TLS, or a trusted proxy says so in `X-Forwarded-Proto`.
    pub fn is_https(&self, req: &HttpRequest) -> bool {
        if self.https || req.app_config().secure() {
            return true;
        }
        let from_proxy = req
            .peer_addr()
            .is_some_and(|peer| self.is_trusted(peer.ip()));
        from_proxy
            && req
                .headers()
                .get("x-forwarded-proto")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(',').next())
                .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
    }

    /// The client's address: the TCP peer, or, when the peer is a trusted proxy, the nearest
    /// address in `X-Forwarded-For` that is not itself a trusted proxy (each proxy appends the
    /// address it saw, so the list is read from the right).
    pub fn client_ip(&self, req: &HttpRequest) -> Option<IpAddr> {
        let mut client = canonical(req.peer_addr()?.ip());
        if !self.is_trusted(client) {
            return Some(client);
        }
        let forwarded: Vec<IpAddr> = req
            .headers()
            .get_all("x-forwarded-for")
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|hop| hop.trim().parse::<IpAddr>())
            .collect::<Result<_, _>>()
            // A list with a hop that is not an address cannot be walked: keep the proxy.
            .unwrap_or_default();
        for hop in forwarded.into_iter().rev() {
            client = canonical(hop);
            if !self.is_trusted(client) {
                break;
            }
        }
        Some(client)
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:10.0.0.1`) is compared as the IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn request(peer: &str, headers: &[(&str, &str)]) -> HttpRequest {
        let mut request = TestRequest::default().peer_addr(peer.parse().unwrap());
        for (name, value) in headers {
            request = request.insert_header((*name, *value));
        }
        request.to_http_request()
    }

    fn access(url: Option<&str>, proxies: &[&str]) -> PublicAccess {
        let proxies: Vec<String> = proxies.iter().map(|p| (*p).to_owned()).collect();
        PublicAccess::new(url, &proxies).unwrap()
    }

    #[test]
    fn settings_are_checked() {
        assert!(PublicAccess::new(Some("hf.example.com"), &[]).is_err());
        assert!(PublicAccess::new(Some("https://"), &[]).is_err());
        assert!(PublicAccess::new(None, &["10.0.0.0/33".to_owned()]).is_err());
        assert!(PublicAccess::new(None, &["proxy".to_owned()]).is_err());
        assert!(access(Some("HTTPS://hf.example.com/"), &[]).https);
        assert!(!access(Some("http://hf.example.com"), &[]).https);
        assert_eq!(
            access(None, &["10.0.0.0/8", "::1", "192.168.1.7"])
                .trusted_proxies
                .len(),
            3
        );
    }

    #[test]
    fn forwarded_headers_are_believed_only_from_trusted_proxies() {
        let headers = [
            ("x-forwarded-proto", "https"),
            ("x-forwarded-for", "203.0.113.9, 10.0.0.2"),
        ];
        let direct = access(None, &[]);
        let req = request("10.0.0.1:5000", &headers);
        assert!(!direct.is_https(&req));
        assert_eq!(direct.client_ip(&req), "10.0.0.1".parse().ok());

        let behind = access(None, &["10.0.0.0/8"]);
        assert!(behind.is_https(&req));
        // 10.0.0.2 is a proxy too; the client is the nearest untrusted hop.
        assert_eq!(behind.client_ip(&req), "203.0.113.9".parse().ok());

        let stranger = request("198.51.100.4:5000", &headers);
        assert!(!behind.is_https(&stranger));
        assert_eq!(behind.client_ip(&stranger), "198.51.100.4".parse().ok());

        let mapped = request("[::ffff:10.0.0.1]:5000", &headers);
        assert!(behind.is_https(&mapped));

        let garbage = request("10.0.0.1:5000", &[("x-forwarded-for", "not-an-address")]);
        assert_eq!(behind.client_ip(&garbage), "10.0.0.1".parse().ok());
    }

    #[test]
    fn an_https_public_url_makes_every_request_https() {
        let public = access(Some("https://hf.example.com"), &[]);
        assert!(public.is_https(&request("198.51.100.4:5000", &[])));
    }
}
