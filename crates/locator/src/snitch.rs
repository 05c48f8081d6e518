//! Where this node is: its data centre and rack.

use crate::topology::Location;

/// Cassandra's endpoint snitches that Helenus supports. A snitch places this node; the other
/// nodes' places come from them (gossip, later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snitch {
    /// `SimpleSnitch`: every node in `datacenter1`, `rack1`.
    Simple,
    /// `GossipingPropertyFileSnitch`: the data centre and rack the node's configuration gives
    /// (Cassandra reads them from `cassandra-rackdc.properties`; Helenus from its YAML's `dc`
    /// and `rack`).
    GossipingPropertyFile { datacenter: String, rack: String },
}

/// `SimpleSnitch`'s data centre and rack.
pub const SIMPLE_SNITCH_DATACENTER: &str = "datacenter1";
pub const SIMPLE_SNITCH_RACK: &str = "rack1";

impl Snitch {
    /// The snitch named by `endpoint_snitch` (a class name, short or with Cassandra's package),
    /// with the configured `dc` and `rack` for the snitches that read them; `None` for a snitch
    /// Helenus does not have.
    pub fn from_class_name(class: &str, dc: &str, rack: &str) -> Option<Snitch> {
        let short = class.rsplit('.').next().unwrap_or(class);
        match short {
            "SimpleSnitch" => Some(Snitch::Simple),
            "GossipingPropertyFileSnitch" => Some(Snitch::GossipingPropertyFile {
                datacenter: dc.to_string(),
                rack: rack.to_string(),
            }),
            _ => None,
        }
    }

    /// This node's data centre and rack.
    pub fn local_location(&self) -> Location {
        match self {
            Snitch::Simple => Location {
                datacenter: SIMPLE_SNITCH_DATACENTER.to_string(),
                rack: SIMPLE_SNITCH_RACK.to_string(),
            },
            Snitch::GossipingPropertyFile { datacenter, rack } => Location {
                datacenter: datacenter.clone(),
                rack: rack.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_snitch_places_every_node_in_datacenter1_rack1() {
        for class in ["SimpleSnitch", "org.apache.cassandra.locator.SimpleSnitch"] {
            let snitch = Snitch::from_class_name(class, "dc9", "r9").expect("known");
            assert_eq!(
                snitch.local_location(),
                Location {
                    datacenter: "datacenter1".to_string(),
                    rack: "rack1".to_string()
                }
            );
        }
        let gossiping =
            Snitch::from_class_name("GossipingPropertyFileSnitch", "dc9", "r9").expect("known");
        assert_eq!(gossiping.local_location().datacenter, "dc9");
        assert_eq!(gossiping.local_location().rack, "r9");
        assert_eq!(Snitch::from_class_name("Ec2Snitch", "dc9", "r9"), None);
    }
}
