//! The network under the messaging service, behind a trait so that a simulator (turmoil) can
//! replace TCP: the service only connects, binds and accepts through [`Network`], and reads
//! and writes byte streams.

use std::any::Any;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A future a network call returns.
pub type NetworkFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// A connected byte stream (a TCP connection, or a simulated one).
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// The stream as `Any`: a tokio TCP stream can move to another runtime (a shard).
    fn as_any(&self) -> &dyn Any;
    /// The stream as `Any`, to take a tokio TCP stream out.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// An accepted stream on its way to the runtime that serves it.
pub(crate) enum Portable {
    /// A TCP connection, off the accepting runtime's reactor: `attach` registers it with the
    /// runtime it is called on.
    Tcp(std::net::TcpStream),
    /// Any other stream (a simulated one): bound to the runtime it was accepted on.
    Bound(Box<dyn Stream>),
}

impl Portable {
    /// Takes `stream` off its runtime if it can move (a tokio TCP stream).
    pub fn detach(stream: Box<dyn Stream>) -> io::Result<Portable> {
        // `(*stream)`: a `Box<dyn Stream>` is itself a `Stream`, whose `as_any` is the box's.
        if !(*stream).as_any().is::<tokio::net::TcpStream>() {
            return Ok(Portable::Bound(stream));
        }
        let tcp = stream
            .into_any()
            .downcast::<tokio::net::TcpStream>()
            .expect("checked above");
        Ok(Portable::Tcp(tcp.into_std()?))
    }

    /// Whether the stream can be served on another runtime.
    pub fn is_movable(&self) -> bool {
        matches!(self, Portable::Tcp(_))
    }

    /// The stream, registered with the calling runtime if it moved.
    pub fn attach(self) -> io::Result<Box<dyn Stream>> {
        match self {
            Portable::Tcp(tcp) => Ok(Box::new(tokio::net::TcpStream::from_std(tcp)?)),
            Portable::Bound(stream) => Ok(stream),
        }
    }
}

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
