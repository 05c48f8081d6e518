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
