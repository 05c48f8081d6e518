//! Whether one type can take over the values another type wrote: Cassandra's
//! `isValueCompatibleWith` and `isSerializationCompatibleWith`, which decide whether a column
//! dropped with one type may be added again, under its name, with another. The rules were read
//! off Apache Cassandra 5.0.9's answers to every pair of 32 types and 47 more pairs.

use crate::CqlType;

impl CqlType {
    /// The type Cassandra records for a dropped column of this type: every UDT in it as the
    /// tuple of its field types.
    pub fn as_dropped(&self) -> CqlType {
        match self {
            CqlType::Udt(u) => {
                let fields = u.fields.iter().map(|(_, t)| t.as_dropped()).collect();
                CqlType::Frozen(Box::new(CqlType::Tuple(fields)))
            }
            CqlType::Frozen(inner) => match inner.as_dropped() {
                frozen @ CqlType::Frozen(_) => frozen,
                other => CqlType::Frozen(Box::new(other)),
            },
            CqlType::List(e) => CqlType::List(Box::new(e.as_dropped())),
            CqlType::Set(e) => CqlType::Set(Box::new(e.as_dropped())),
            CqlType::Map(k, v) => CqlType::Map(Box::new(k.as_dropped()), Box::new(v.as_dropped())),
            CqlType::Tuple(items) => {
                CqlType::Tuple(items.iter().map(CqlType::as_dropped).collect())
            }
            CqlType::Vector(e, n) => CqlType::Vector(Box::new(e.as_dropped()), *n),
            native => native.clone(),
        }
    }

    /// Whether a column of this type may be added where a column of type `dropped` (as
    /// `as_dropped` records it) was dropped: it reads the old cells' values, with the same
    /// fixed length and the same cell structure, and a collection stays a collection.
    pub fn can_replace_dropped(&self, dropped: &CqlType) -> bool {
        if self.is_collection() != dropped.is_collection()
            || self.is_multi_cell() != dropped.is_multi_cell()
        {
            return false;
        }
        match (self.unfrozen(), dropped.unfrozen()) {
            // A collection's elements must also keep their fixed length.
            (CqlType::List(a), CqlType::List(b)) | (CqlType::Set(a), CqlType::Set(b)) => {
                a.reads_values_of(b) && a.fixed_length() == b.fixed_length()
            }
            (CqlType::Map(ak, av), CqlType::Map(bk, bv)) => {
                ak.reads_values_of(bk)
                    && ak.fixed_length() == bk.fixed_length()
                    && av.reads_values_of(bv)
                    && av.fixed_length() == bv.fixed_length()
            }
            _ => self.reads_values_of(dropped) && self.fixed_length() == dropped.fixed_length(),
        }
    }

    /// Cassandra's `isValueCompatibleWith`: whether every serialised value of `old` is a valid
    /// value of this type, meaning the same (a type hint's value may go where such a type is
    /// expected).
    pub fn is_value_compatible_with(&self, old: &CqlType) -> bool {
        self.reads_values_of(old)
    }

    /// Whether every serialised value of `old` is a valid value of this type, meaning the same
    /// (Cassandra's `isValueCompatibleWith`).
    fn reads_values_of(&self, old: &CqlType) -> bool {
        use CqlType::*;
        let multi_cell = old.is_multi_cell();
        let (new, old) = (self.unfrozen(), old.unfrozen());
        if new == old {
            return true;
        }
        match (new, old) {
            (Blob, _) => !multi_cell,
            (Text, Ascii)
            | (Bigint, Timestamp)
            | (Timestamp, Bigint)
            | (Uuid, Timeuuid)
            | (Varint, Int | Bigint)
            | (Date, Int) => true,
            // A tuple may grow at its end.
            (Tuple(a), Tuple(b)) => {
                a.len() >= b.len() && a.iter().zip(b).all(|(x, y)| x.reads_values_of(y))
            }
            (List(a), List(b)) | (Set(a), Set(b)) => a.reads_values_of(b),
            (Map(ak, av), Map(bk, bv)) => ak.reads_values_of(bk) && av.reads_values_of(bv),
            _ => false,
        }
    }

    /// The length of every serialised value of this type, if it has one.
    fn fixed_length(&self) -> Option<u64> {
        match self.unfrozen() {
            CqlType::Boolean => Some(1),
            CqlType::Int | CqlType::Float => Some(4),
            CqlType::Bigint | CqlType::Timestamp | CqlType::Double | CqlType::Counter => Some(8),
            CqlType::Uuid | CqlType::Timeuuid => Some(16),
            CqlType::Vector(e, n) => e.fixed_length().map(|l| l * u64::from(*n)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UdtType;

    fn frozen(t: CqlType) -> CqlType {
        CqlType::Frozen(Box::new(t))
    }

    fn list(t: CqlType) -> CqlType {
        CqlType::List(Box::new(t))
    }

    fn tuple(items: &[CqlType]) -> CqlType {
        frozen(CqlType::Tuple(items.to_vec()))
    }

    /// Pairs (dropped, added) Cassandra 5.0.9 accepts, and pairs it refuses.
    #[test]
    fn re_adding_follows_cassandra() {
        use CqlType::*;
        let accepted = [
            (Bigint, Timestamp),
            (Timestamp, Bigint),
            (Varint, Blob),
            (Ascii, Text),
            (Date, Blob),
            (Timeuuid, Uuid),
            (Inet, Blob),
            (list(Text), list(Blob)),
            (frozen(list(Text)), frozen(list(Blob))),
            (tuple(&[Int, Int]), tuple(&[Int, Int, Int])),
            (tuple(&[Int, Int]), tuple(&[Blob, Blob])),
            (tuple(&[Int, Int]), Blob),
            (tuple(&[Int]), tuple(&[Varint])),
            (tuple(&[Int]), tuple(&[Date])),
            (tuple(&[frozen(list(Int))]), tuple(&[frozen(list(Varint))])),
            (tuple(&[frozen(list(Int))]), tuple(&[Blob])),
        ];
        let refused = [
            (Int, Blob),
            (Int, Varint),
            (Int, Date),
            (Blob, Text),
            (Text, Ascii),
            (Float, Blob),
            (Counter, Bigint),
            (Time, Bigint),
            (Decimal, Varint),
            (list(Int), list(Blob)),
            (list(Int), frozen(list(Int))),
            (frozen(list(Int)), list(Int)),
            (frozen(list(Int)), frozen(list(Blob))),
            (frozen(list(Int)), Blob),
            (Blob, frozen(list(Int))),
            (tuple(&[Int, Int, Int]), tuple(&[Int, Int])),
            (tuple(&[Int]), tuple(&[Bigint])),
            (tuple(&[Date]), tuple(&[Int])),
            (Vector(Box::new(Float), 2), Blob),
        ];
        for (dropped, added) in accepted {
            assert!(
                added.can_replace_dropped(&dropped.as_dropped()),
                "{dropped} -> {added}"
            );
        }
        for (dropped, added) in refused {
            assert!(
                !added.can_replace_dropped(&dropped.as_dropped()),
                "{dropped} -> {added}"
            );
        }
    }

    /// A dropped UDT is recorded as a tuple, which no UDT reads: not even the same UDT may be
    /// added again (Cassandra 5.0.9 refuses it too).
    #[test]
    fn a_dropped_udt_is_a_tuple() {
        let u = CqlType::Udt(UdtType {
            keyspace: "ks".into(),
            name: "u".into(),
            fields: vec![("a".into(), CqlType::Int), ("b".into(), CqlType::Text)],
        });
        let dropped = frozen(u.clone()).as_dropped();
        assert_eq!(dropped.to_string(), "frozen<tuple<int, text>>");
        assert!(!frozen(u).can_replace_dropped(&dropped));
        assert!(tuple(&[CqlType::Int, CqlType::Text]).can_replace_dropped(&dropped));
        assert!(CqlType::Blob.can_replace_dropped(&dropped));
    }
}
