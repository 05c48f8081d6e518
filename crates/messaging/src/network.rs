//! The network under the messaging service, behind a trait so that a simulator (turmoil) can
//! replace TCP: the service only connects, binds and accepts through [`Network`], and reads
//! and writes byte streams.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A future a network call returns.
pub type NetworkFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// A connected byte stream (a TCP connection, or a simulated one).
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A bound listener.
pub trait Listener: Send + 'static {
    /// The next incoming connection and the address it comes from.
    fn accept(&mut self) -> NetworkFuture<'_, (Box<dyn Stream>, SocketAddr)>;
    /// The address bound (with the port the system chose, if port 0 was asked for).
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Connects and binds. Implementations: [`TcpNetwork`] (the default).
pub trait Network: Send + Sync + 'static {
    /// Opens a stream to `to`.
    fn connect(&self, to: SocketAddr) -> NetworkFuture<'_, Box<dyn Stream>>;
    /// Listens at `address` (port 0: any free port).
    fn bind(&self, address: SocketAddr) -> NetworkFuture<'_, Box<dyn Listener>>;
}

/// TCP through tokio, with Nagle off (a request is written whole, and small ones must not wait
/// for the previous one's acknowledgement).
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpNetwork;

struct TcpListener(tokio::net::TcpListener);

impl Listener for TcpListener {
    fn accept(&mut self) -> NetworkFuture<'_, (Box<dyn Stream>, SocketAddr)> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            stream.set_nodelay(true)?;
            Ok((Box::new(stream) as Box<dyn Stream>, from))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Network for TcpNetwork {
    fn connect(&self, to: SocketAddr) -> NetworkFuture<'_, Box<dyn Stream>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(to).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn Stream>)
        })
    }

    fn bind(&self, address: SocketAddr) -> NetworkFuture<'_, Box<dyn Listener>> {
        Box::pin(async move {
            // tokio sets SO_REUSEADDR on Unix, so a restarted node binds its port again at
            // once.
            let listener = tokio::net::TcpListener::bind(address).await?;
            Ok(Box::new(TcpListener(listener)) as Box<dyn Listener>)
        })
    }
}
