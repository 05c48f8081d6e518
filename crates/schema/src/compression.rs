//! A table's `compression` option as Cassandra 5.0 reads, stores and validates it
//! (`CompressionParams.fromMap`, the compressors' `create`, `validate` and `asMap`). Helenus
//! compresses its own files its own way; the option is kept as Cassandra would keep it.

use std::collections::BTreeMap;

use crate::java;
use crate::SchemaError;

/// Cassandra 5.0's compressors, in `COMPRESSION_PACKAGE`, with the options each takes.
const COMPRESSION_PACKAGE: &str = "org.apache.cassandra.io.compress";
const COMPRESSORS: [(&str, &[&str]); 5] = [
    (
        "LZ4Compressor",
        &["lz4_compressor_type", "lz4_high_compressor_level"],
    ),
    ("SnappyCompressor", &[]),
    ("DeflateCompressor", &[]),
    ("ZstdCompressor", &["compression_level"]),
    ("NoopCompressor", &[]),
];

/// Chunk lengths are given in KiB and kept in bytes in a Java int.
const MAX_CHUNK_LENGTH_KB: i32 = i32::MAX / 1024;
const DEFAULT_CHUNK_LENGTH_KB: i32 = 16;
/// LZ4's high-compression levels (`LZ4Compressor`).
const LZ4_HIGH_LEVELS: std::ops::RangeInclusive<i32> = 1..=17;
/// Zstd's levels (`ZstdCompressor`: zstd's negative fast levels through its maximum).
const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = -131_072..=22;

fn config(message: String) -> SchemaError {
    SchemaError::Config(message)
}

/// `enabled` as Java's `Boolean.parseBoolean` reads it: only `true` (any case) is true.
fn enabled(options: &BTreeMap<String, String>) -> bool {
    options
        .get("enabled")
        .is_none_or(|v| v.eq_ignore_ascii_case("true"))
}

/// `CompressionParams.fromMap`, `validate` and `asMap`: the map as Cassandra stores it. An
/// empty map, or `enabled` anything but true, turns compression off (`{'enabled': 'false'}`).
pub(crate) fn from_map(
    given: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SchemaError> {
    if !given.is_empty() && enabled(&given) && !given.contains_key("class") {
        return Err(config(
            "Missing sub-option 'class' for the 'compression' option.".to_string(),
        ));
    }
    let mut options = given.clone();
    let on = enabled(&options);
    options.remove("enabled");
    if !on && !options.is_empty() {
        return Err(config(
            "If the 'enabled' option is set to false no other options must be specified"
                .to_string(),
        ));
    }
    let class = match options.remove("class") {
        Some(c) if c.is_empty() => return Err(config(
            "The 'class' option must not be empty. To disable compression use 'enabled' : false"
                .to_string(),
        )),
        other => other,
    };
    let chunk_length_kb = match options.remove("chunk_length_in_kb") {
        None => DEFAULT_CHUNK_LENGTH_KB,
        Some(v) => {
            let kb = java::parse_int(&v)
                .ok_or_else(|| config("Invalid value for chunk_length_in_kb".to_string()))?;
            if kb > MAX_CHUNK_LENGTH_KB {
                return Err(config(format!(
                    "Value of chunk_length_in_kb is too large ({kb})"
                )));
            }
            kb
        }
    };
    let min_compress_ratio = match options.remove("min_compress_ratio") {
        None => 0.0,
        // Cassandra's `Double.parseDouble` fails uncaught (a server error there).
        Some(v) => {
            java::parse_double(&v).ok_or_else(|| config(format!("For input string: \"{v}\"")))?
        }
    };
    let Some(class) = class else {
        return Ok(BTreeMap::from([(
            "enabled".to_string(),
            "false".to_string(),
        )]));
    };
    let full = if class.contains('.') {
        class
    } else {
        format!("{COMPRESSION_PACKAGE}.{class}")
    };
    let (name, supported) = full
        .strip_prefix(COMPRESSION_PACKAGE)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|name| COMPRESSORS.iter().find(|(c, _)| *c == name))
        .copied()
        .ok_or_else(|| config(format!("Could not create Compression for type {full}")))?;
    compressor_options(name, &options)?;
    if let Some(unknown) = java::hash_order(options.keys()).find(|k| !supported.contains(k)) {
        return Err(config(format!("Unknown compression options {unknown}")));
    }
    check_lengths(chunk_length_kb, min_compress_ratio)?;
    let mut stored = options;
    stored.insert("class".to_string(), full);
    stored.insert(
        "chunk_length_in_kb".to_string(),
        chunk_length_kb.to_string(),
    );
    if min_compress_ratio != 0.0 {
        stored.insert(
            "min_compress_ratio".to_string(),
            java::double_to_string(min_compress_ratio),
        );
    }
    Ok(stored)
}

/// What each compressor's `create` refuses of its own options.
fn compressor_options(name: &str, options: &BTreeMap<String, String>) -> Result<(), SchemaError> {
    match name {
        "LZ4Compressor" => {
            if let Some(v) = options.get("lz4_compressor_type") {
                if v != "high" && v != "fast" {
                    return Err(config(format!(
                        "Invalid compressor type '{v}' specified for LZ4 parameter 'lz4_compressor_type'. Valid options are [high, fast]."
                    )));
                }
            }
            if let Some(v) = options.get("lz4_high_compressor_level") {
                let valid = java::parse_int(v).is_some_and(|l| LZ4_HIGH_LEVELS.contains(&l));
                if !valid {
                    return Err(config(format!(
                        "Invalid value [{v}] for parameter 'lz4_high_compressor_level'. Value must be between 1 and 17."
                    )));
                }
            }
        }
        "ZstdCompressor" => {
            if let Some(v) = options.get("compression_level") {
                let level = java::parse_int(v).ok_or_else(|| {
                    config(format!(
                        "ZstdCompressor.create() threw an error: java.lang.NumberFormatException For input string: \"{v}\""
                    ))
                })?;
                if !ZSTD_LEVELS.contains(&level) {
                    return Err(config(format!(
                        "ZstdCompressor.create() threw an error: java.lang.IllegalArgumentException compression_level={level} is invalid"
                    )));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `CompressionParams.validate`: the chunk length a power of two, and the compression ratio
/// giving a maximum compressed length (`ceil(min(chunk / ratio, Integer.MAX_VALUE))`) that is
/// 0, the maximum, or at most the chunk.
fn check_lengths(chunk_length_kb: i32, min_compress_ratio: f64) -> Result<(), SchemaError> {
    let chunk = i64::from(chunk_length_kb) * 1024;
    if chunk <= 0 {
        return Err(config(
            "Invalid negative or null chunk_length_in_kb".to_string(),
        ));
    }
    if chunk & (chunk - 1) != 0 {
        return Err(config(
            "chunk_length_in_kb must be a power of 2".to_string(),
        ));
    }
    let max_compressed = (chunk as f64 / min_compress_ratio).min(f64::from(i32::MAX));
    // Java's `(int) Math.ceil(x)`: NaN becomes 0.
    let max_compressed = if max_compressed.is_nan() {
        0
    } else {
        max_compressed.ceil() as i64
    };
    if max_compressed < 0 {
        return Err(config("Invalid negative min_compress_ratio".to_string()));
    }
    if max_compressed > chunk && max_compressed < i64::from(i32::MAX) {
        return Err(config(
            "min_compress_ratio can either be 0 or greater than or equal to 1".to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn stored(pairs: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
        from_map(map(pairs)).map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_map_or_a_false_enabled_turns_compression_off() {
        let off = Ok(map(&[("enabled", "false")]));
        assert_eq!(stored(&[]), off);
        assert_eq!(stored(&[("enabled", "x")]), off);
        assert_eq!(
            stored(&[("enabled", "false"), ("chunk_length_in_kb", "64")]),
            Err(
                "If the 'enabled' option is set to false no other options must be specified"
                    .to_string()
            )
        );
    }

    #[test]
    fn compression_is_stored_and_refused_as_cassandra_does() {
        assert_eq!(
            stored(&[
                ("class", "LZ4Compressor"),
                ("min_compress_ratio", "2"),
                ("chunk_length_in_kb", "+16")
            ]),
            Ok(map(&[
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
                ("chunk_length_in_kb", "16"),
                ("min_compress_ratio", "2.0"),
            ]))
        );
        for (pairs, error) in [
            (vec![("chunk_length_in_kb", "64")], "Missing sub-option 'class' for the 'compression' option."),
            (vec![("class", "")], "The 'class' option must not be empty. To disable compression use 'enabled' : false"),
            (vec![("class", "LZ4Compressor"), ("chunk_length_in_kb", "3")], "chunk_length_in_kb must be a power of 2"),
            (vec![("class", "LZ4Compressor"), ("chunk_length_in_kb", "-16")], "Invalid negative or null chunk_length_in_kb"),
            (vec![("class", "LZ4Compressor"), ("chunk_length_in_kb", "1.5")], "Invalid value for chunk_length_in_kb"),
            (vec![("class", "LZ4Compressor"), ("chunk_length_in_kb", "2097152")], "Value of chunk_length_in_kb is too large (2097152)"),
            (vec![("class", "LZ4Compressor"), ("min_compress_ratio", "0.5")], "min_compress_ratio can either be 0 or greater than or equal to 1"),
            (vec![("class", "LZ4Compressor"), ("min_compress_ratio", "-1")], "Invalid negative min_compress_ratio"),
            (vec![("class", "LZ4Compressor"), ("crc_check_chance", "0.5")], "Unknown compression options crc_check_chance"),
            (vec![("class", "DeflateCompressor"), ("compression_level", "3")], "Unknown compression options compression_level"),
            (vec![("class", "FooCompressor")], "Could not create Compression for type org.apache.cassandra.io.compress.FooCompressor"),
        ] {
            assert_eq!(stored(&pairs), Err(error.to_string()), "{pairs:?}");
        }
    }
}
