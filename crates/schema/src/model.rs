//! The schema model: keyspaces hold tables and user types; tables hold columns.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use types::CqlType;
use uuid::Uuid;

use crate::options::{Replication, TableOptions};

/// Keyspaces the node defines itself; users can neither create nor alter them.
pub const SYSTEM_KEYSPACES: &[&str] = &[
    "system",
    "system_schema",
    "system_auth",
    "system_distributed",
    "system_traces",
    "system_virtual_schema",
    "system_views",
];

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SchemaError {
    /// Maps to CQL `Invalid`.
    #[error("{0}")]
    Invalid(String),
    /// Maps to CQL `ConfigError`.
    #[error("{0}")]
    Config(String),
    /// Maps to CQL `SyntaxError`.
    #[error("{0}")]
    Syntax(String),
    /// Maps to CQL `AlreadyExists`.
    #[error("{message}")]
    AlreadyExists {
        keyspace: String,
        table: String,
        message: String,
    },
    #[error("corrupt persisted schema: {0}")]
    Corrupt(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Regular,
    Static,
}

impl ColumnKind {
    /// The name `system_schema.columns.kind` uses.
    pub fn schema_name(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Regular => "regular",
            ColumnKind::Static => "static",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusteringOrder {
    Asc,
    Desc,
    /// For columns that are not clustering columns.
    None,
}

impl ClusteringOrder {
    pub fn schema_name(self) -> &'static str {
        match self {
            ClusteringOrder::Asc => "asc",
            ClusteringOrder::Desc => "desc",
            ClusteringOrder::None => "none",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnMetadata {
    pub name: String,
    pub ty: CqlType,
    pub kind: ColumnKind,
    /// Position within the partition key or clustering key; -1 otherwise (as Cassandra reports).
    pub position: i32,
    pub order: ClusteringOrder,
    /// Stable storage id: cells are stored under this, never under the name, so renames are
    /// free and a dropped-then-re-added column never sees the old data.
    pub id: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableMetadata {
    pub keyspace: String,
    pub name: String,
    pub id: Uuid,
    /// Primary-key columns first (partition key, then clustering, in key order), then static
    /// columns, then regular ones, each group ordered by name — the order `SELECT *` returns
    /// them in.
    pub columns: Vec<ColumnMetadata>,
    pub partition_key_count: usize,
    pub clustering_count: usize,
    pub options: TableOptions,
    /// Tables served by the node itself (system keyspaces) rather than from storage.
    pub virtual_table: bool,
    pub next_column_id: u32,
    /// The columns dropped from the table, by name, the latest drop of each (Cassandra keeps
    /// them when a column is added again under the name). A column added under a dropped
    /// name must be able to take over its values (`add_column`). Schemas persisted before
    /// this was kept have none.
    #[serde(default)]
    pub dropped_columns: BTreeMap<String, DroppedColumn>,
}

/// A column dropped from a table: a row of Cassandra's `system_schema.dropped_columns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedColumn {
    /// As Cassandra records it (`CqlType::as_dropped`): every UDT as the tuple of its fields.
    pub ty: CqlType,
    pub kind: ColumnKind,
    /// The drop's timestamp (its `USING TIMESTAMP`, else when it ran), in microseconds.
    pub dropped_time_micros: i64,
}

impl TableMetadata {
    /// Builds a table, ordering columns as Cassandra does and assigning column ids.
    /// `columns` are (name, type, is_static); keys name columns in `columns`.
    pub fn new(
        keyspace: &str,
        name: &str,
        id: Uuid,
        columns: Vec<(String, CqlType, bool)>,
        partition_key: &[String],
        clustering: &[(String, ClusteringOrder)],
        options: TableOptions,
    ) -> Result<TableMetadata, SchemaError> {
        if partition_key.is_empty() {
            return Err(SchemaError::Invalid(
                "No PRIMARY KEY specifed for table (exactly one required)".to_string(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (c, _, _) in &columns {
            if !seen.insert(c.clone()) {
                return Err(SchemaError::Invalid(format!(
                    "Duplicate column '{c}' declaration for table '{keyspace}.{name}'"
                )));
            }
        }
        let find = |n: &str| columns.iter().find(|(c, _, _)| c == n);
        let mut out = Vec::with_capacity(columns.len());
        let mut next_id = 0u32;
        for (pos, pk) in partition_key.iter().enumerate() {
            let (_, ty, is_static) = find(pk).ok_or_else(|| {
                SchemaError::Invalid(format!(
                    "Unknown column '{pk}' referenced in PRIMARY KEY for table '{name}'"
                ))
            })?;
            if *is_static {
                return Err(SchemaError::Invalid(format!(
                    "Static column {pk} cannot be part of the PRIMARY KEY"
                )));
            }
            check_key_type(pk, ty, "PRIMARY KEY")?;
            if out.iter().any(|c: &ColumnMetadata| &c.name == pk) {
                return Err(SchemaError::Invalid(format!(
                    "Duplicate column '{pk}' in PRIMARY KEY clause for table '{name}'"
                )));
            }
            out.push(ColumnMetadata {
                name: pk.clone(),
                ty: ty.clone(),
                kind: ColumnKind::PartitionKey,
                position: pos as i32,
                order: ClusteringOrder::None,
                id: next_id,
            });
            next_id += 1;
        }
        for (pos, (ck, order)) in clustering.iter().enumerate() {
            let (_, ty, is_static) = find(ck).ok_or_else(|| {
                SchemaError::Invalid(format!(
                    "Unknown column '{ck}' referenced in PRIMARY KEY for table '{name}'"
                ))
            })?;
            if *is_static {
                return Err(SchemaError::Invalid(format!(
                    "Static column {ck} cannot be part of the PRIMARY KEY"
                )));
            }
            check_key_type(ck, ty, "PRIMARY KEY")?;
            if out.iter().any(|c: &ColumnMetadata| &c.name == ck) {
                return Err(SchemaError::Invalid(format!(
                    "Duplicate column '{ck}' in PRIMARY KEY clause for table '{name}'"
                )));
            }
            out.push(ColumnMetadata {
                name: ck.clone(),
                ty: ty.clone(),
                kind: ColumnKind::Clustering,
                position: pos as i32,
                order: *order,
                id: next_id,
            });
            next_id += 1;
        }
        let mut rest: Vec<&(String, CqlType, bool)> = columns
            .iter()
            .filter(|(c, _, _)| !out.iter().any(|k| &k.name == c))
            .collect();
        // Static columns first, then regular ones, each by name: Cassandra's `SELECT *` order.
        rest.sort_by(|a, b| (!a.2, &a.0).cmp(&(!b.2, &b.0)));
        let has_static = rest.iter().any(|(_, _, s)| *s);
        if has_static && clustering.is_empty() {
            return Err(SchemaError::Invalid(
                "Static columns are only useful (and thus allowed) if the table has at least one clustering column".to_string(),
            ));
        }
        let counters = columns.iter().filter(|(_, t, _)| t.is_counter()).count();
        if counters > 0 && counters != rest.len() {
            return Err(SchemaError::Invalid(
                "Cannot mix counter and non counter columns in the same table".to_string(),
            ));
        }
        for (c, ty, is_static) in rest {
            out.push(ColumnMetadata {
                name: c.clone(),
                ty: ty.clone(),
                kind: if *is_static {
                    ColumnKind::Static
                } else {
                    ColumnKind::Regular
                },
                position: -1,
                order: ClusteringOrder::None,
                id: next_id,
            });
            next_id += 1;
        }
        Ok(TableMetadata {
            keyspace: keyspace.to_string(),
            name: name.to_string(),
            id,
            columns: out,
            partition_key_count: partition_key.len(),
            clustering_count: clustering.len(),
            options,
            virtual_table: false,
            next_column_id: next_id,
            dropped_columns: BTreeMap::new(),
        })
    }

    pub fn column(&self, name: &str) -> Option<&ColumnMetadata> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn partition_key(&self) -> &[ColumnMetadata] {
        &self.columns[..self.partition_key_count]
    }

    pub fn clustering(&self) -> &[ColumnMetadata] {
        &self.columns[self.partition_key_count..self.partition_key_count + self.clustering_count]
    }

    /// Static and regular columns.
    pub fn non_key_columns(&self) -> &[ColumnMetadata] {
        &self.columns[self.partition_key_count + self.clustering_count..]
    }

    pub fn has_static_columns(&self) -> bool {
        self.non_key_columns()
            .iter()
            .any(|c| c.kind == ColumnKind::Static)
    }

    pub fn is_counter_table(&self) -> bool {
        self.non_key_columns().iter().any(|c| c.ty.is_counter())
    }

    /// `ALTER TABLE ... ADD`.
    pub fn add_column(
        &mut self,
        name: &str,
        ty: CqlType,
        is_static: bool,
    ) -> Result<(), SchemaError> {
        if self.column(name).is_some() {
            return Err(SchemaError::Invalid(format!(
                "Column with name '{name}' already exists"
            )));
        }
        if is_static && self.clustering_count == 0 {
            return Err(SchemaError::Invalid(
                "Static columns are only useful (and thus allowed) if the table has at least one clustering column".to_string(),
            ));
        }
        if let Some(dropped) = self.dropped_columns.get(name) {
            // Cassandra's rule, although a column added again here never reads the old
            // cells (column ids are not reused): its schema must stay one Cassandra accepts.
            if !ty.can_replace_dropped(&dropped.ty) {
                return Err(SchemaError::Invalid(format!(
                    "Cannot add a column '{name}' of type {ty}, incompatible with previously dropped column '{name}' of type {}",
                    dropped.ty
                )));
            }
        }
        if ty.is_counter() != self.is_counter_table() && !self.non_key_columns().is_empty() {
            return Err(SchemaError::Invalid(
                "Cannot mix counter and non counter columns in the same table".to_string(),
            ));
        }
        let column = ColumnMetadata {
            name: name.to_string(),
            ty,
            kind: if is_static {
                ColumnKind::Static
            } else {
                ColumnKind::Regular
            },
            position: -1,
            order: ClusteringOrder::None,
            id: self.next_column_id,
        };
        self.next_column_id += 1;
        let key_count = self.partition_key_count + self.clustering_count;
        let order = |static_column: bool, name: &str| (!static_column, name.to_string());
        let new_order = order(is_static, name);
        let at = self.columns[key_count..]
            .iter()
            .position(|c| order(c.kind == ColumnKind::Static, &c.name) > new_order)
            .map(|p| p + key_count)
            .unwrap_or(self.columns.len());
        self.columns.insert(at, column);
        Ok(())
    }

    /// `ALTER TABLE ... DROP`, at `timestamp_micros` (the drop's time, as recorded).
    pub fn drop_column(&mut self, name: &str, timestamp_micros: i64) -> Result<(), SchemaError> {
        let idx = self.column_index(name).ok_or_else(|| {
            SchemaError::Invalid(format!(
                "Column {name} was not found in table '{}.{}'",
                self.keyspace, self.name
            ))
        })?;
        if idx < self.partition_key_count + self.clustering_count {
            return Err(SchemaError::Invalid(format!(
                "Cannot drop PRIMARY KEY column {name}"
            )));
        }
        // Cassandra cannot record a non-frozen UDT's cells as a dropped column's.
        if let ty @ CqlType::Udt(_) = &self.columns[idx].ty {
            return Err(SchemaError::Invalid(format!(
                "Cannot drop non-frozen column {name} of user type {ty}"
            )));
        }
        let dropped = self.columns.remove(idx);
        let record = DroppedColumn {
            ty: dropped.ty.as_dropped(),
            kind: dropped.kind,
            dropped_time_micros: timestamp_micros,
        };
        self.dropped_columns.insert(dropped.name, record);
        Ok(())
    }

    /// `ALTER TABLE ... RENAME`: only primary-key columns may be renamed (Cassandra's rule).
    pub fn rename_column(&mut self, from: &str, to: &str) -> Result<(), SchemaError> {
        let idx = self.column_index(from).ok_or_else(|| {
            SchemaError::Invalid(format!(
                "Undefined column name {from} in table {}.{}",
                self.keyspace, self.name
            ))
        })?;
        if idx >= self.partition_key_count + self.clustering_count {
            return Err(SchemaError::Invalid(format!(
                "Cannot rename non PRIMARY KEY column {from}"
            )));
        }
        if self.column(to).is_some() {
            return Err(SchemaError::Invalid(format!(
                "Cannot rename column {from} to {to} in table '{}.{}'; another column with that name already exists",
                self.keyspace, self.name
            )));
        }
        self.columns[idx].name = to.to_string();
        Ok(())
    }
}

fn check_key_type(name: &str, ty: &CqlType, what: &str) -> Result<(), SchemaError> {
    if ty.is_multi_cell() && ty.is_collection() {
        return Err(SchemaError::Invalid(format!(
            "Invalid non-frozen collection type {ty} for {what} column '{name}'"
        )));
    }
    if ty.is_multi_cell() {
        return Err(SchemaError::Invalid(format!(
            "Invalid non-frozen user-defined type {ty} for {what} column '{name}'"
        )));
    }
    if ty.is_counter() {
        return Err(SchemaError::Invalid(format!(
            "counter type is not supported for PRIMARY KEY column '{name}'"
        )));
    }
    if matches!(ty.unfrozen(), CqlType::Duration) {
        return Err(SchemaError::Invalid(format!(
            "duration type is not supported for PRIMARY KEY column '{name}'"
        )));
    }
    Ok(())
}

/// A user-defined type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserType {
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyspaceMetadata {
    pub name: String,
    pub durable_writes: bool,
    pub replication: Replication,
    pub tables: BTreeMap<String, Arc<TableMetadata>>,
    pub types: BTreeMap<String, Arc<UserType>>,
    /// Keyspaces served by the node itself (system ones); never persisted.
    pub virtual_keyspace: bool,
}

/// The whole schema. Immutable once built: changes clone it, modify the clone and swap it in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub keyspaces: BTreeMap<String, Arc<KeyspaceMetadata>>,
    /// Changes with every DDL statement; reported as `schema_version`.
    pub version: Uuid,
}

impl Schema {
    pub fn keyspace(&self, name: &str) -> Option<&Arc<KeyspaceMetadata>> {
        self.keyspaces.get(name)
    }

    pub fn table(&self, keyspace: &str, table: &str) -> Option<&Arc<TableMetadata>> {
        self.keyspaces.get(keyspace)?.tables.get(table)
    }

    pub fn table_by_id(&self, id: Uuid) -> Option<&Arc<TableMetadata>> {
        self.keyspaces
            .values()
            .flat_map(|k| k.tables.values())
            .find(|t| t.id == id)
    }

    /// The user keyspaces only, serialised for persistence (system keyspaces are rebuilt at
    /// start-up from code, so an upgrade can change them).
    pub fn to_persisted_json(&self) -> Result<Vec<u8>, SchemaError> {
        let user = Schema {
            keyspaces: self
                .keyspaces
                .iter()
                .filter(|(_, k)| !k.virtual_keyspace)
                .map(|(n, k)| (n.clone(), k.clone()))
                .collect(),
            version: self.version,
        };
        serde_json::to_vec(&user).map_err(|e| SchemaError::Corrupt(e.to_string()))
    }

    pub fn from_persisted_json(bytes: &[u8]) -> Result<Schema, SchemaError> {
        serde_json::from_slice(bytes).map_err(|e| SchemaError::Corrupt(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableMetadata {
        TableMetadata::new(
            "ks",
            "t",
            Uuid::nil(),
            vec![
                ("v".into(), CqlType::Text, false),
                ("c".into(), CqlType::Int, false),
                ("s".into(), CqlType::Int, true),
                ("k".into(), CqlType::Int, false),
                ("a".into(), CqlType::Blob, false),
            ],
            &["k".to_string()],
            &[("c".to_string(), ClusteringOrder::Desc)],
            TableOptions::default(),
        )
        .expect("valid table")
    }

    #[test]
    fn columns_are_ordered_keys_first_then_statics_then_by_name() {
        // Cassandra 5.0's SELECT * order.
        let mut t = table();
        let names: Vec<_> = t.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k", "c", "s", "a", "v"]);
        t.add_column("b", CqlType::Int, true).expect("add static");
        t.add_column("b2", CqlType::Int, false)
            .expect("add regular");
        let names: Vec<_> = t.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k", "c", "b", "s", "a", "b2", "v"]);
        assert_eq!(t.clustering()[0].order, ClusteringOrder::Desc);
        assert_eq!(t.column("s").map(|c| c.kind), Some(ColumnKind::Static));
    }

    #[test]
    fn column_ids_are_never_reused() {
        let mut t = table();
        let old = t.column("v").map(|c| c.id);
        let ty = t.column("v").map(|c| c.ty.clone()).expect("v");
        t.drop_column("v", 0).expect("drop");
        t.add_column("v", ty, false).expect("add");
        assert_ne!(t.column("v").map(|c| c.id), old);
    }

    #[test]
    fn key_rules() {
        let err = TableMetadata::new(
            "ks",
            "t",
            Uuid::nil(),
            vec![("k".into(), CqlType::List(Box::new(CqlType::Int)), false)],
            &["k".to_string()],
            &[],
            TableOptions::default(),
        );
        assert!(matches!(err, Err(SchemaError::Invalid(_))));
        let err = TableMetadata::new(
            "ks",
            "t",
            Uuid::nil(),
            vec![
                ("k".into(), CqlType::Int, false),
                ("s".into(), CqlType::Int, true),
            ],
            &["k".to_string()],
            &[],
            TableOptions::default(),
        );
        assert!(matches!(err, Err(SchemaError::Invalid(_))));
    }

    #[test]
    fn replication_normalises_class() {
        let opts = BTreeMap::from([
            ("class".to_string(), "SimpleStrategy".to_string()),
            ("replication_factor".to_string(), "3".to_string()),
        ]);
        let r = Replication::from_options(&opts, "datacenter1", "ks", None).expect("valid");
        assert_eq!(
            r.options().get("class").map(String::as_str),
            Some("org.apache.cassandra.locator.SimpleStrategy")
        );
        assert_eq!(r.replication_factor(), 3);
        let nts = BTreeMap::from([
            ("class".to_string(), "NetworkTopologyStrategy".to_string()),
            ("replication_factor".to_string(), "2".to_string()),
        ]);
        let r = Replication::from_options(&nts, "datacenter1", "ks", None).expect("valid");
        assert_eq!(
            r.options().get("datacenter1").map(String::as_str),
            Some("2")
        );
    }

    #[test]
    fn replication_is_parsed_once_into_its_typed_strategy_and_persisted_as_its_options() {
        use locator::ReplicationStrategy;
        let options = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let simple = Replication::from_options(
            &options(&[("class", "SimpleStrategy"), ("replication_factor", "3")]),
            "dc1",
            "ks",
            None,
        )
        .expect("valid");
        assert_eq!(
            simple.strategy(),
            &ReplicationStrategy::Simple {
                replication_factor: 3
            }
        );
        // The shorthand expands to the local data centre; a data centre at 0 is dropped.
        let nts = Replication::from_options(
            &options(&[
                ("class", "NetworkTopologyStrategy"),
                ("replication_factor", "2"),
            ]),
            "dc1",
            "ks",
            None,
        )
        .expect("valid");
        assert_eq!(
            nts.strategy(),
            &ReplicationStrategy::network_topology([("dc1".to_string(), 2)])
        );
        assert_eq!(Replication::local().strategy(), &ReplicationStrategy::Local);
        // Persisted as the options alone (the form stored before the typed strategy), and
        // parsed again when loaded.
        let json = serde_json::to_string(&nts).expect("serialise");
        assert_eq!(
            json,
            r#"{"class":"org.apache.cassandra.locator.NetworkTopologyStrategy","dc1":"2"}"#
        );
        let loaded: Replication = serde_json::from_str(&json).expect("load");
        assert_eq!(loaded, nts);
        assert!(serde_json::from_str::<Replication>(r#"{"class":"Nope"}"#).is_err());
    }

    #[test]
    fn a_keyspace_has_replicas_when_any_data_centre_has_a_factor_above_zero() {
        let nts = |dcs: &[(&str, &str)]| {
            let mut m = BTreeMap::from([(
                "class".to_string(),
                "org.apache.cassandra.locator.NetworkTopologyStrategy".to_string(),
            )]);
            m.extend(dcs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            Replication::from_stored(m).expect("valid")
        };
        for (r, expected) in [
            (nts(&[("dc1", "0"), ("dc2", "2")]), true),
            (nts(&[("dc1", "0"), ("dc2", "0")]), false),
            (nts(&[]), false),
            (nts(&[("dc1", "3/0")]), true),
            (Replication::local(), true),
        ] {
            assert_eq!(r.has_replicas(), expected, "{r:?}");
            assert_eq!(r.has_replicas(), r.replication_factor() > 0, "{r:?}");
        }
    }
}
