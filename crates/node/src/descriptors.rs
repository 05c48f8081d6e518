//! The node's file descriptors: the limit it raises at start, and how it shares them out.
//!
//! Every CQL connection and every open data file holds a descriptor, and so do the commit
//! log, each table's directory handle in RocksDB, the runtimes and the listeners. With the
//! default limit of 1,024 and no cap, 1,100 idle connections left RocksDB unable to open a new
//! commit log file, and every later write failed. So the node raises its soft limit to the hard
//! limit (Cassandra's packaging sets 100,000), and shares the result out:
//! - half to CQL connections: the default of `native_transport_max_concurrent_connections`
//!   (Cassandra's default is no cap, -1), and the most a configured value may take;
//! - a quarter to RocksDB's table files (`max_open_files`): more files than that stay closed
//!   and are opened when read;
//! - the rest to everything else: the commit log, a directory handle per table, manifest,
//!   info log, flush and compaction outputs, runtimes, listeners, admin connections.

use std::io;

/// Below this, Cassandra's start-up checks warn (`SystemInfo`, "Minimum value for max open
/// files should be >= 10000"); so does the node.
pub const RECOMMENDED_OPEN_FILES: u64 = 10_000;
/// Below this the shares are too small to run a node (RocksDB alone keeps at least 20 table
/// files open): the node refuses to start.
pub const MIN_OPEN_FILES: u64 = 256;

/// The descriptor limit and its shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub open_files: u64,
    /// The most CQL connections open at once.
    pub connections: usize,
    /// RocksDB's table files kept open.
    pub data_files: usize,
}

impl Budget {
    pub fn new(open_files: u64) -> Result<Budget, String> {
        if open_files < MIN_OPEN_FILES {
            return Err(format!(
                "the open file limit is {open_files}, too low to run a node (at least \
                 {MIN_OPEN_FILES}, {RECOMMENDED_OPEN_FILES} or more recommended): raise it \
                 (ulimit -n, LimitNOFILE)"
            ));
        }
        let share = |divisor: u64| usize::try_from(open_files / divisor).unwrap_or(usize::MAX);
        Ok(Budget {
            open_files,
            connections: share(2),
            data_files: share(4),
        })
    }
}

/// RLIMIT_NOFILE before and after raising the soft limit to the hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub before: u64,
    pub now: u64,
}

/// Raises this process's soft limit on open files to its hard limit.
pub fn raise_open_file_limit() -> io::Result<Raised> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit to the pointer, which points to one.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the limit from the pointer, which points to one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok(Raised {
        before,
        now: limit.rlim_cur,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_goes_to_connections_and_a_quarter_to_data_files() {
        assert_eq!(
            Budget::new(1024),
            Ok(Budget {
                open_files: 1024,
                connections: 512,
                data_files: 256
            })
        );
        let large = Budget::new(1 << 20).expect("budget");
        assert_eq!((large.connections, large.data_files), (1 << 19, 1 << 18));
        assert_eq!(Budget::new(MIN_OPEN_FILES).expect("budget").data_files, 64);
        let refused = Budget::new(MIN_OPEN_FILES - 1).expect_err("too low");
        assert!(
            refused.contains("255") && refused.contains("ulimit"),
            "{refused}"
        );
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let raised = raise_open_file_limit().expect("raise");
        assert!(raised.now >= raised.before);
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as in `raise_open_file_limit`.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
            0
        );
        assert_eq!(limit.rlim_cur, limit.rlim_max);
        assert_eq!(raised.now, limit.rlim_cur);
    }
}
