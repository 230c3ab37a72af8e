//! The model the bodies reach: the stand-in served for the kernel's whole
//! life, or the proxy to the owner's provider.

use std::path::Path;

use super::{random_key, KernelError};
use crate::settings::{Provider, Settings};
use crate::{proxy, standin};

/// The model the bodies reach: one stand-in for the kernel's whole life (its
/// script goes on across generations; each generation gets its own key), or
/// the proxy to the owner's provider, bound anew for each generation's key.
pub(super) enum Model {
    Standin { url: String, keys: standin::KeyHandle },
    Proxy { task: Option<tokio::task::JoinHandle<()>> },
}

impl Model {
    pub(super) async fn start(settings: &Settings, home: &Path) -> Result<Model, KernelError> {
        if settings.provider != Provider::Standin {
            return Ok(Model::Proxy { task: None });
        }
        let config = standin::Config {
            key: Some(random_key()?),
            script: settings.standin_script.as_ref().map(|p| home.join(p)),
            log: settings.standin_log.as_ref().map(|p| home.join(p)),
        };
        let server = standin::Standin::bind(([127, 0, 0, 1], 0).into(), config)
            .await
            .map_err(|e| KernelError::Io(format!("the stand-in model: {e}")))?;
        let (url, keys) = (server.base_url(), server.keys());
        tokio::spawn(server.serve());
        Ok(Model::Standin { url, keys })
    }

    /// The base URL a generation with `key` uses; only `key` is accepted there now.
    pub(super) async fn url_for(
        &mut self,
        key: &str,
        settings: &Settings,
    ) -> Result<String, KernelError> {
        match self {
            Model::Standin { url, keys } => {
                keys.set(key);
                Ok(url.clone())
            }
            Model::Proxy { task } => {
                if let Some(old) = task.take() {
                    old.abort();
                }
                let upstream = match settings.provider {
                    Provider::ChatGpt => {
                        return Err(KernelError::Io(
                            "the ChatGPT sign-in is not built yet; use TENERAL_PROVIDER=openai or compatible".into(),
                        ))
                    }
                    _ => proxy::Upstream::from_settings(settings)
                        .ok_or_else(|| KernelError::Io("TENERAL_BASE_URL and TENERAL_API_KEY are needed".into()))?,
                };
                let server =
                    proxy::Proxy::bind(([127, 0, 0, 1], 0).into(), upstream, key.to_owned())
                        .await
                        .map_err(|e| KernelError::Io(format!("the model proxy: {e}")))?;
                let url = format!("http://{}/v1", server.local_addr());
                *task = Some(tokio::spawn(server.serve()));
                Ok(url)
            }
        }
    }
}
