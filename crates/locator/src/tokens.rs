//! This node's tokens: minted once, at its first start, and kept.
//!
//! Stored form (the node's metadata store, key chosen by the node): the tokens one after
//! another, each 8 bytes, big-endian two's complement, in ascending order; nothing else (no
//! count, no version: the length is a multiple of 8).

use crate::{HostId, LocatorError, Token};

/// Where this node's tokens are kept (the node implements it over storage's metadata, so that
/// this crate does no I/O and knows no storage engine).
pub trait TokenStore {
    /// The stored bytes, or `None` before the first start.
    fn load(&self) -> Result<Option<Vec<u8>>, String>;
    /// Stores `bytes` durably.
    fn save(&self, bytes: &[u8]) -> Result<(), String>;
}

/// This node's tokens: the stored ones, else `num_tokens` new ones minted from `seed` (the
/// node's host id, so two nodes mint different tokens) and stored before they are returned.
/// Stored tokens of another count than `num_tokens` are refused, as Cassandra refuses to start:
/// a node never changes tokens on a restart (its data would belong to other ranges).
pub fn load_or_mint(
    store: &dyn TokenStore,
    host_id: HostId,
    num_tokens: usize,
    seed: u64,
) -> Result<Vec<Token>, LocatorError> {
    load_or_assign(store, host_id, num_tokens, &[], seed).map(|(tokens, _)| tokens)
}

/// Where the tokens [`load_or_assign`] returned come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenOrigin {
    /// Taken at an earlier start and kept.
    Stored,
    /// The configured `initial_token`, taken at this (first) start.
    Initial,
    /// Minted at random at this (first) start.
    Minted,
}

/// As [`load_or_mint`], but a first start takes `initial` (Cassandra's `initial_token`, which
/// must hold `num_tokens` distinct tokens, none the minimum) when it is not empty. Once the
/// node has tokens, `initial` is not looked at: Cassandra uses `initial_token` only to
/// bootstrap.
pub fn load_or_assign(
    store: &dyn TokenStore,
    host_id: HostId,
    num_tokens: usize,
    initial: &[Token],
    seed: u64,
) -> Result<(Vec<Token>, TokenOrigin), LocatorError> {
    if let Some(bytes) = store.load().map_err(LocatorError::Store)? {
        let tokens = decode(&bytes)?;
        if tokens.len() != num_tokens {
            return Err(LocatorError::TokenCountChanged {
                stored: tokens.len(),
                configured: num_tokens,
            });
        }
        return Ok((tokens, TokenOrigin::Stored));
    }
    let (tokens, origin) = if initial.is_empty() {
        let tokens = partitioner::random_tokens(num_tokens, seed);
        (tokens, TokenOrigin::Minted)
    } else {
        let mut tokens = initial.to_vec();
        tokens.sort_unstable();
        tokens.dedup();
        if tokens.len() != num_tokens || tokens.first() == Some(&Token::MIN) {
            return Err(LocatorError::InvalidTokens {
                host_id,
                detail: format!(
                    "initial_token must list num_tokens ({num_tokens}) distinct tokens, none the minimum"
                ),
            });
        }
        (tokens, TokenOrigin::Initial)
    };
    if tokens.is_empty() {
        return Err(LocatorError::InvalidTokens {
            host_id,
            detail: "num_tokens is 0".to_string(),
        });
    }
    store.save(&encode(&tokens)).map_err(LocatorError::Store)?;
    Ok((tokens, origin))
}

fn encode(tokens: &[Token]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_be_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Result<Vec<Token>, LocatorError> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
        return Err(LocatorError::CorruptTokens(format!(
            "{} bytes, not a positive multiple of 8",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| Token::from_be_bytes(c.try_into().expect("chunks of 8")))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[derive(Default)]
    struct Memory(RefCell<Option<Vec<u8>>>);

    impl TokenStore for Memory {
        fn load(&self) -> Result<Option<Vec<u8>>, String> {
            Ok(self.0.borrow().clone())
        }
        fn save(&self, bytes: &[u8]) -> Result<(), String> {
            *self.0.borrow_mut() = Some(bytes.to_vec());
            Ok(())
        }
    }

    fn host() -> HostId {
        HostId(uuid::Uuid::from_u128(7))
    }

    #[test]
    fn a_restart_keeps_the_tokens_it_minted() {
        let store = Memory::default();
        let first = load_or_mint(&store, host(), 16, 42).expect("mint");
        assert_eq!(first.len(), 16);
        assert!(first.windows(2).all(|w| w[0] < w[1]));
        // A restart with another seed still loads the same.
        let again = load_or_mint(&store, host(), 16, 43).expect("load");
        assert_eq!(again, first);
        // Another count is refused, in Cassandra's words.
        let e = load_or_mint(&store, host(), 8, 42).expect_err("16 stored");
        assert_eq!(
            e.to_string(),
            "Cannot change the number of tokens from 16 to 8"
        );
    }

    #[test]
    fn the_stored_form_is_big_endian_tokens() {
        let store = Memory::default();
        let tokens = load_or_mint(&store, host(), 2, 1).expect("mint");
        let bytes = store.0.borrow().clone().expect("saved");
        assert_eq!(bytes.len(), 16);
        assert_eq!(bytes[..8], tokens[0].to_be_bytes());
        assert_eq!(bytes[8..], tokens[1].to_be_bytes());
    }

    #[test]
    fn damaged_or_failing_stores_are_errors() {
        let store = Memory(RefCell::new(Some(vec![0; 7])));
        assert!(matches!(
            load_or_mint(&store, host(), 16, 1),
            Err(LocatorError::CorruptTokens(_))
        ));
        struct Broken;
        impl TokenStore for Broken {
            fn load(&self) -> Result<Option<Vec<u8>>, String> {
                Ok(None)
            }
            fn save(&self, _: &[u8]) -> Result<(), String> {
                Err("disk full".to_string())
            }
        }
        assert_eq!(
            load_or_mint(&Broken, host(), 16, 1),
            Err(LocatorError::Store("disk full".to_string()))
        );
        assert!(matches!(
            load_or_mint(&Memory::default(), host(), 0, 1),
            Err(LocatorError::InvalidTokens { .. })
        ));
    }

    #[test]
    fn a_first_start_takes_the_initial_tokens_and_keeps_them() {
        let store = Memory::default();
        let (tokens, origin) = load_or_assign(&store, host(), 3, &[30, -10, 20], 1).expect("take");
        assert_eq!(
            (tokens.clone(), origin),
            (vec![-10, 20, 30], TokenOrigin::Initial)
        );
        // A restart keeps them, whatever initial_token says now.
        let (again, origin) = load_or_assign(&store, host(), 3, &[1, 2, 3], 1).expect("load");
        assert_eq!((again, origin), (tokens, TokenOrigin::Stored));
        let (_, origin) = load_or_assign(&Memory::default(), host(), 2, &[], 1).expect("mint");
        assert_eq!(origin, TokenOrigin::Minted);
        for bad in [&[1, 1][..], &[1][..], &[Token::MIN, 1][..]] {
            assert!(
                matches!(
                    load_or_assign(&Memory::default(), host(), 2, bad, 1),
                    Err(LocatorError::InvalidTokens { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
