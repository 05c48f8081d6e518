//! Messaging's [`Network`] over turmoil's simulated TCP: the real `MessagingService` dials,
//! listens and exchanges bytes through the simulator, which decides latency, delivery order
//! between connections, partitions and crashes.

use std::io;
use std::net::SocketAddr;

use messaging::{Listener, Network, NetworkFuture, Stream};

/// Connects and binds through turmoil (`turmoil::net`): usable only on a simulated host's
/// runtime, where turmoil's world is entered.
#[derive(Debug, Default, Clone, Copy)]
pub struct TurmoilNetwork;

struct TurmoilListener(turmoil::net::TcpListener);

impl Listener for TurmoilListener {
    fn accept(&mut self) -> NetworkFuture<'_, (Box<dyn Stream>, SocketAddr)> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            Ok((Box::new(stream) as Box<dyn Stream>, from))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Network for TurmoilNetwork {
    fn connect(&self, to: SocketAddr) -> NetworkFuture<'_, Box<dyn Stream>> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(to).await?;
            Ok(Box::new(stream) as Box<dyn Stream>)
        })
    }

    fn bind(&self, address: SocketAddr) -> NetworkFuture<'_, Box<dyn Listener>> {
        Box::pin(async move {
            let listener = turmoil::net::TcpListener::bind(address).await?;
            Ok(Box::new(TurmoilListener(listener)) as Box<dyn Listener>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PORT: u16 = 7000;

    #[test]
    fn bytes_cross_the_simulated_network_both_ways() {
        let mut sim = turmoil::Builder::new().build();
        sim.host("server", || async {
            let mut listener = TurmoilNetwork
                .bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), PORT))
                .await?;
            assert_eq!(listener.local_addr()?.port(), PORT);
            let (mut stream, from) = listener.accept().await?;
            assert_eq!(from.ip(), turmoil::lookup("client"));
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).await?;
            stream
                .write_all(&buf.map(|b| b.to_ascii_uppercase()))
                .await?;
            Ok(())
        });
        sim.client("client", async {
            let server = SocketAddr::new(turmoil::lookup("server"), PORT);
            let mut stream = TurmoilNetwork.connect(server).await?;
            stream.write_all(b"hello").await?;
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).await?;
            assert_eq!(&buf, b"HELLO");
            Ok(())
        });
        sim.run().expect("the simulation");
    }

    #[test]
    fn connecting_to_a_host_that_does_not_listen_fails() {
        let mut sim = turmoil::Builder::new().build();
        sim.host("idle", || async {
            std::future::pending::<()>().await;
            Ok(())
        });
        sim.client("client", async {
            let idle = SocketAddr::new(turmoil::lookup("idle"), PORT);
            assert!(TurmoilNetwork.connect(idle).await.is_err());
            Ok(())
        });
        sim.run().expect("the simulation");
    }
}
