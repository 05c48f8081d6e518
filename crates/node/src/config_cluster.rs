//! The configuration of a node's place in a cluster, in Cassandra's forms: `seed_provider`
//! (`SimpleSeedProvider`'s comma-separated `seeds`), `initial_token` (comma-separated tokens)
//! and `cassandra-rackdc.properties` (`GossipingPropertyFileSnitch`'s data centre and rack).
//! Pure parsing; `config.rs` applies the results and resolves host names.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, bail, Result};
use serde_yaml::Value;

/// The one seed provider Helenus has, as Cassandra names it.
pub const SIMPLE_SEED_PROVIDER: &str = "org.apache.cassandra.locator.SimpleSeedProvider";

/// The file `GossipingPropertyFileSnitch` reads, beside the configuration file.
pub const RACKDC_FILE_NAME: &str = "cassandra-rackdc.properties";

/// The seeds `seed_provider` lists, as written (`host` or `host:port`, trimmed, none empty).
///
/// Cassandra's form is a list of one class with its parameters:
///
/// ```yaml
/// seed_provider:
///   - class_name: org.apache.cassandra.locator.SimpleSeedProvider
///     parameters:
///       - seeds: "127.0.0.1:7000,127.0.0.2"
/// ```
///
/// A single mapping instead of the list, and `parameters` as a mapping rather than a list of
/// one, are accepted too. Any class but `SimpleSeedProvider` is refused: Helenus has no other.
pub fn seed_provider_seeds(v: &Value) -> Result<Vec<String>> {
    let provider = match v {
        Value::Sequence(items) if items.len() == 1 => &items[0],
        Value::Sequence(items) => bail!(
            "invalid value for 'seed_provider': expected one provider (class_name and parameters), got {}",
            items.len()
        ),
        other => other,
    };
    let Value::Mapping(provider) = provider else {
        bail!("invalid value for 'seed_provider': expected '- class_name: {SIMPLE_SEED_PROVIDER}' with 'parameters: - seeds: \"ADDRESS,...\"'");
    };
    let class = provider
        .get("class_name")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("invalid value for 'seed_provider': class_name is missing"))?;
    if class.rsplit('.').next() != Some("SimpleSeedProvider") {
        bail!("seed_provider class '{class}' is not supported (Helenus has {SIMPLE_SEED_PROVIDER} only)");
    }
    let seeds = match provider.get("parameters") {
        Some(Value::Sequence(parameters)) => {
            parameters.iter().filter_map(|p| p.get("seeds")).next_back()
        }
        Some(parameters @ Value::Mapping(_)) => parameters.get("seeds"),
        _ => None,
    };
    let seeds = seeds.and_then(Value::as_str).ok_or_else(|| {
        anyhow!("invalid value for 'seed_provider': parameters must give seeds: \"ADDRESS,...\"")
    })?;
    let list: Vec<String> = seeds
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if list.is_empty() {
        bail!("The seed provider lists no seeds.");
    }
    Ok(list)
}

/// A seed as written, split into host and port (`None` when it names none): `10.0.0.1`,
/// `10.0.0.1:7000`, `::1`, `[::1]:7000`, `cassandra-1`, `cassandra-1:7000`.
pub fn split_seed(seed: &str) -> Result<(String, Option<u16>)> {
    if let Ok(address) = seed.parse::<SocketAddr>() {
        return Ok((address.ip().to_string(), Some(address.port())));
    }
    if let Ok(ip) = seed.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok((ip.to_string(), None));
    }
    match seed.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| anyhow!("invalid seed '{seed}': '{port}' is not a port"))?;
            Ok((host.to_string(), Some(port)))
        }
        Some(_) => bail!("invalid seed '{seed}'"),
        None => Ok((seed.to_string(), None)),
    }
}

/// Every address of each seed (a host name may have several), with `default_port` (the node's
/// `storage_port`, as Cassandra's) where a seed names no port. A name that does not resolve is
/// left out with a warning, as Cassandra's `SimpleSeedProvider` does; if none is left, the
/// node cannot start, in Cassandra's words.
pub fn resolve_seeds(
    seeds: &[String],
    default_port: u16,
    resolve: impl Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>,
) -> Result<(Vec<SocketAddr>, Vec<String>)> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for seed in seeds {
        let (host, port) = split_seed(seed)?;
        let port = port.unwrap_or(default_port);
        match host.parse::<IpAddr>() {
            Ok(ip) => out.push(SocketAddr::new(ip, port)),
            Err(_) => match resolve(&host, port) {
                Ok(addresses) if !addresses.is_empty() => out.extend(addresses),
                _ => warnings.push(format!("Seed provider couldn't lookup host {host}")),
            },
        }
    }
    out.dedup();
    if out.is_empty() {
        bail!("The seed provider lists no seeds.");
    }
    Ok((out, warnings))
}

/// The system resolver, for [`resolve_seeds`].
pub fn system_resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// `initial_token`: comma-separated Murmur3 tokens, each a signed 64-bit decimal, all
/// different. The minimum token is refused: Cassandra's Murmur3Partitioner reserves it for the
/// start of the ring.
pub fn initial_tokens(text: &str) -> Result<Vec<locator::Token>> {
    let mut tokens = Vec::new();
    for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let value: locator::Token = token.parse().map_err(|_| {
            anyhow!("Invalid token for Murmur3Partitioner. Got {token} but expected a long value (unsigned 8 bytes integer).")
        })?;
        if value == locator::Token::MIN {
            bail!("invalid value for 'initial_token': {token} is the minimum token, which no node may own");
        }
        if tokens.contains(&value) {
            bail!("invalid value for 'initial_token': token {token} is listed twice");
        }
        tokens.push(value);
    }
    if tokens.is_empty() {
        bail!("invalid value for 'initial_token': no tokens");
    }
    Ok(tokens)
}

/// Cassandra's check of `initial_token` against `num_tokens` (`applyTokensConfig`): one token
/// alone sets `num_tokens` to 1 when it is not given; otherwise the counts must agree. Returns
/// the number of tokens.
pub fn check_initial_token_count(tokens: usize, num_tokens: Option<usize>) -> Result<usize> {
    match num_tokens {
        None if tokens == 1 => Ok(1),
        None => bail!("initial_token was set but num_tokens is not!"),
        Some(n) if n != tokens => bail!(
            "The number of initial tokens (by initial_token) specified ({tokens}) is different from num_tokens value ({n})"
        ),
        Some(n) => Ok(n),
    }
}

/// A Java properties file's keys and values, as `Properties.load` reads the simple forms:
/// `key=value`, `key: value` or `key value`, blank lines and `#`/`!` comments skipped,
/// whitespace around keys and values trimmed. Line continuations and escapes are not read
/// (`cassandra-rackdc.properties` uses none); a later key replaces an earlier one.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line
            .find(|c: char| c == '=' || c == ':' || c.is_whitespace())
            .unwrap_or(line.len());
        let (key, rest) = line.split_at(split);
        let rest = rest.trim_start();
        let value = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim();
        out.insert(key.to_string(), value.to_string());
    }
    out
}

/// `GossipingPropertyFileSnitch`'s data centre and rack from `cassandra-rackdc.properties`
/// (`dc`, `rack`, trimmed), refused in Cassandra's words when either is missing (or, unlike
/// Cassandra, empty: no data centre can be named by an empty string in a replication map).
pub fn rackdc_location(properties: &BTreeMap<String, String>) -> Result<(String, String)> {
    match (properties.get("dc"), properties.get("rack")) {
        (Some(dc), Some(rack)) if !dc.is_empty() && !rack.is_empty() => {
            Ok((dc.clone(), rack.clone()))
        }
        _ => bail!(
            "DC or rack not found in snitch properties, check your configuration in: {RACKDC_FILE_NAME}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        serde_yaml::from_str(text).expect("yaml")
    }

    #[test]
    fn seeds_in_cassandras_form() {
        let v = yaml("- class_name: org.apache.cassandra.locator.SimpleSeedProvider\n  parameters:\n    - seeds: \"127.0.0.1:7000, 127.0.0.2,,node-3\"\n");
        assert_eq!(
            seed_provider_seeds(&v).expect("valid"),
            ["127.0.0.1:7000", "127.0.0.2", "node-3"]
        );
        let short = yaml("class_name: SimpleSeedProvider\nparameters:\n  seeds: 10.0.0.1\n");
        assert_eq!(seed_provider_seeds(&short).expect("valid"), ["10.0.0.1"]);
        for (bad, message) in [
            (
                "- class_name: com.example.K8sSeedProvider\n  parameters:\n    - seeds: a",
                "is not supported",
            ),
            (
                "- class_name: SimpleSeedProvider\n  parameters:\n    - seeds: \" , \"",
                "lists no seeds",
            ),
            (
                "- class_name: SimpleSeedProvider",
                "parameters must give seeds",
            ),
            ("- parameters:\n    - seeds: a", "class_name is missing"),
            ("[]", "expected one provider"),
            ("127.0.0.1", "expected '- class_name"),
        ] {
            let e = seed_provider_seeds(&yaml(bad)).expect_err(bad).to_string();
            assert!(e.contains(message), "{bad}: {e}");
        }
    }

    #[test]
    fn seeds_take_the_storage_port_unless_they_name_one() {
        let seeds: Vec<String> = [
            "127.0.0.1",
            "127.0.0.2:7001",
            "::1",
            "[::2]:7002",
            "db-1",
            "db-2:7003",
            "nowhere",
        ]
        .map(String::from)
        .to_vec();
        let resolve = |host: &str, port: u16| match host {
            "db-1" => Ok(vec![
                SocketAddr::new([10, 0, 0, 1].into(), port),
                SocketAddr::new([10, 0, 0, 11].into(), port),
            ]),
            "db-2" => Ok(vec![SocketAddr::new([10, 0, 0, 2].into(), port)]),
            _ => Err(std::io::Error::other("unknown host")),
        };
        let (addresses, warnings) = resolve_seeds(&seeds, 7100, resolve).expect("resolved");
        let shown: Vec<String> = addresses.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "127.0.0.1:7100",
                "127.0.0.2:7001",
                "[::1]:7100",
                "[::2]:7002",
                "10.0.0.1:7100",
                "10.0.0.11:7100",
                "10.0.0.2:7003"
            ]
        );
        assert_eq!(warnings, ["Seed provider couldn't lookup host nowhere"]);
        let e = resolve_seeds(&["nowhere".to_string()], 7000, resolve).expect_err("none left");
        assert_eq!(e.to_string(), "The seed provider lists no seeds.");
        assert!(split_seed("127.0.0.1:http").is_err());
        assert!(split_seed("db:0").is_err());
    }

    #[test]
    fn initial_tokens_are_checked_as_cassandra_does() {
        assert_eq!(
            initial_tokens(" -9223372036854775807, 0 ,42,9223372036854775807").expect("valid"),
            [-9223372036854775807, 0, 42, 9223372036854775807]
        );
        for (bad, message) in [
            (
                "12, x",
                "Invalid token for Murmur3Partitioner. Got x but expected a long value",
            ),
            ("9223372036854775808", "Got 9223372036854775808"),
            ("-9223372036854775808", "minimum token"),
            ("1, 1", "listed twice"),
            (" , ", "no tokens"),
        ] {
            let e = initial_tokens(bad).expect_err(bad).to_string();
            assert!(e.contains(message), "{bad}: {e}");
        }
        assert_eq!(check_initial_token_count(1, None).expect("one"), 1);
        assert_eq!(check_initial_token_count(4, Some(4)).expect("agree"), 4);
        assert_eq!(
            check_initial_token_count(2, None)
                .expect_err("unset")
                .to_string(),
            "initial_token was set but num_tokens is not!"
        );
        assert_eq!(
            check_initial_token_count(2, Some(16)).expect_err("differ").to_string(),
            "The number of initial tokens (by initial_token) specified (2) is different from num_tokens value (16)"
        );
    }

    #[test]
    fn rackdc_properties_as_java_reads_them() {
        let p = parse_properties(
            "# GossipingPropertyFileSnitch\n\n dc = dc-east \nrack:r7\n! old\nprefer_local true\n",
        );
        assert_eq!(p["dc"], "dc-east");
        assert_eq!(p["rack"], "r7");
        assert_eq!(p["prefer_local"], "true");
        assert_eq!(
            rackdc_location(&p).expect("both"),
            ("dc-east".to_string(), "r7".to_string())
        );
        for missing in ["dc=dc1\n", "rack=r1\n", "dc=\nrack=r1\n", ""] {
            let e = rackdc_location(&parse_properties(missing)).expect_err(missing);
            assert_eq!(
                e.to_string(),
                "DC or rack not found in snitch properties, check your configuration in: cassandra-rackdc.properties"
            );
        }
    }
}
