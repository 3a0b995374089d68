//! The plan: what a validated configuration becomes, built once per profile and never
//! changed afterwards.
//!
//! A [`Plan`] is the routing table of one profile: every loaded model resolved to its
//! ordered [`Routes`] (each an [`Endpoint`] with its URL parsed and its wire chosen, the
//! [`Admission`] to pass and, for a local model, its child), the catalog, the dominions'
//! admission handles and the web-search client. A request looks its model up by name once
//! and then only follows references: no other string lookup, no URL parse, nothing to
//! re-check.
//!
//! The local children are not the plan's: they live in a [`Fleet`] (the local overlay),
//! and the plan refers to them. Admission state is not the plan's either: [`Staged`]
//! decides, without touching anything live, which dominion state each admission handle
//! shares with the plan before (same dominion id, same local child) and which limits
//! apply once the plan is swapped in ([`Staged::commit`]).

mod endpoint;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

pub(crate) use endpoint::{ApiPath, Endpoint, Limits, PlainTarget};

use crate::admission::shared::Shared;
use crate::admission::{Admission, AdmissionLimits, Snapshot};
use crate::config::{
    Config, DEFAULT_FAILOVER_COOLDOWN, DominionConfig, DominionKind, LocalLaunch, ModelBackend,
    ModelConfig, ModelKind, QueuePolicy, ToolDialect, WebSearchConfig,
};
use crate::local::{Fleet, Running};

/// Queue length of a local model's own admission (no dominion bound).
pub(crate) const LOCAL_MODEL_QUEUE: u32 = 100;

/// The fixed bounds of requests to a local child (the `[[endpoint]]` defaults, with a
/// shorter connect deadline: the child is on loopback).
const LOCAL_LIMITS: Limits = Limits {
    connect_timeout: std::time::Duration::from_secs(5),
    timeout: std::time::Duration::from_secs(600),
    stream_first_byte_timeout: std::time::Duration::from_secs(120),
    stream_idle_timeout: std::time::Duration::from_secs(120),
    max_response_bytes: 32 * 1024 * 1024,
    max_stream_event_bytes: 1024 * 1024,
    failover_cooldown: DEFAULT_FAILOVER_COOLDOWN,
};

/// One way to a model: the endpoint, the admission it passes, the child behind it.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// The endpoint (a local model's is its child's loopback endpoint).
    pub endpoint: Arc<Endpoint>,
    /// The admission a request passes (`None`: unlimited).
    pub admission: Option<Admission>,
    /// The local child behind the endpoint, for its respawn-once.
    pub child: Option<Arc<Running>>,
}

/// A model's routes in failover order; never empty.
#[derive(Debug, Clone)]
pub(crate) struct Routes {
    /// Every route but the last (empty for a single-endpoint model).
    pub before: Box<[Route]>,
    /// The last route: always tried.
    pub last: Route,
}

impl Routes {
    /// A single route.
    fn one(route: Route) -> Self {
        Self {
            before: Box::new([]),
            last: route,
        }
    }

    /// Every route, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Route> {
        self.before.iter().chain(std::iter::once(&self.last))
    }
}

/// One loaded model as requests see it.
#[derive(Debug)]
pub(crate) struct Model {
    /// The caller-facing name.
    pub name: Arc<str>,
    /// What it serves.
    pub kind: ModelKind,
    /// The model string sent upstream (a local model's own name).
    pub upstream_model: String,
    /// `max_tokens` inserted when a chat request sets no limit.
    pub default_max_tokens: Option<u64>,
    /// How tool calls reach the backend (a local chat model's is resolved from its child).
    pub dialect: ToolDialect,
    /// Where requests go.
    pub routes: Routes,
    /// The validated configuration entry (catalog fields).
    pub config: ModelConfig,
}

impl Model {
    /// Whether a local `llama-server` child serves the model (a local model has one
    /// route, its child's).
    pub(crate) fn is_local(&self) -> bool {
        self.routes.last.child.is_some()
    }
}

/// A local model's child, as `/admin/status` and `/metrics` show it.
#[derive(Debug)]
pub(crate) struct LocalModel {
    /// The model name.
    pub name: String,
    /// The running child.
    pub running: Arc<Running>,
    /// The model's own queue when no dominion governs it.
    pub own_queue: Option<Admission>,
}

/// `[tools.web_search]` with its client.
#[derive(Debug)]
pub(crate) struct Search {
    /// The validated settings.
    pub config: WebSearchConfig,
    /// The provider client.
    pub client: reqwest::Client,
}

/// A dominion with its live admission (`None`: unlimited).
#[derive(Debug)]
pub(crate) struct Dominion {
    /// The validated settings.
    pub config: DominionConfig,
    /// Its admission handle.
    pub admission: Option<Admission>,
}

/// The routing table of one profile (see the module documentation).
#[derive(Debug)]
pub(crate) struct Plan {
    /// The profile's name.
    pub profile: String,
    /// The validated configuration it was built from.
    pub config: Config,
    endpoints: Vec<Arc<Endpoint>>,
    models: Vec<Model>,
    by_name: HashMap<Arc<str>, usize>,
    dominions: Vec<Dominion>,
    local: Vec<LocalModel>,
    search: Option<Search>,
}

/// The admission handles a new plan will hold and the limits to apply when it goes live
/// (see the module documentation). Building it changes nothing.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    /// Per limited dominion id: its handle (shared with the plan before when that one has
    /// the id) and the new limits.
    dominions: HashMap<String, (Admission, AdmissionLimits)>,
    /// Per local model without a dominion: its own queue (shared with the plan before when
    /// the child is the same one).
    local: HashMap<String, Admission>,
}

impl Staged {
    /// The admission of `config` over `fleet`, sharing state with `previous`; a new
    /// remote dominion is shared through `shared` when the replica has `[dominion_store]`.
    pub(crate) fn new(
        config: &Config,
        fleet: &Fleet,
        previous: Option<&Plan>,
        shared: Option<&Shared>,
    ) -> Self {
        let mut staged = Self::default();
        for dominion in &config.dominions {
            let Some(limits) = AdmissionLimits::of(dominion) else {
                continue;
            };
            let kept = previous
                .and_then(|p| p.dominion_admission(&dominion.id))
                .cloned();
            let admission = kept
                .or_else(|| shared.and_then(|shared| shared.admission(dominion)))
                .or_else(|| Admission::new(dominion));
            if let Some(admission) = admission {
                staged
                    .dominions
                    .insert(dominion.id.clone(), (admission, limits));
            }
        }
        for model in &config.models {
            let ModelBackend::Local(launch) = &model.backend else {
                continue;
            };
            if launch.dominion.is_some() {
                continue;
            }
            let Some(running) = fleet.model(&model.name) else {
                continue;
            };
            let kept = previous
                .and_then(|p| p.local.iter().find(|l| l.name == model.name))
                .filter(|l| Arc::ptr_eq(&l.running, running))
                .and_then(|l| l.own_queue.clone());
            if let Some(admission) = kept.or_else(|| Admission::new(&own_queue(model, launch))) {
                staged.local.insert(model.name.clone(), admission);
            }
        }
        staged
    }

    /// Applies the new limits to every dominion state (when the plan goes live).
    pub(crate) fn commit(&self) {
        for (admission, limits) in self.dominions.values() {
            admission.apply(*limits);
        }
    }

    fn dominion(&self, id: &str) -> Option<&Admission> {
        self.dominions.get(id).map(|(admission, _)| admission)
    }
}

/// The queue of a local model that no dominion governs: `parallel` slots, a fixed queue.
fn own_queue(model: &ModelConfig, launch: &LocalLaunch) -> DominionConfig {
    DominionConfig {
        id: format!("local_model:{}", model.name),
        kind: DominionKind::Local,
        max_concurrency: Some(launch.parallel),
        max_queue: LOCAL_MODEL_QUEUE,
        policy: QueuePolicy::Queue,
        fair_scheduling: true,
        vram_gb: None,
        on_store_failure: crate::config::StoreFailure::default(),
    }
}

impl Plan {
    /// Builds the plan of `config` (profile `profile`) over the running `fleet`, with the
    /// admission handles of `staged` and the web-search `search_client` (present when
    /// `config` has `[tools.web_search]`).
    ///
    /// Every local model of `config` must be running in `fleet`, as [`Fleet::start`]
    /// leaves it; a model that is not is left out of the plan (and logged).
    pub(crate) fn build(
        profile: &str,
        config: Config,
        fleet: &Fleet,
        staged: &Staged,
        search_client: Option<reqwest::Client>,
    ) -> Self {
        let endpoints: Vec<Arc<Endpoint>> = config
            .endpoints
            .iter()
            .map(|e| Arc::new(Endpoint::from_config(e)))
            .collect();
        let endpoint_admission: Vec<Option<Admission>> = config
            .endpoints
            .iter()
            .map(|e| {
                e.dominion
                    .as_deref()
                    .and_then(|d| staged.dominion(d))
                    .cloned()
            })
            .collect();
        let mut models = Vec::with_capacity(config.models.len());
        let mut local = Vec::new();
        for model in &config.models {
            let (upstream_model, routes, dialect) = match &model.backend {
                ModelBackend::Remote {
                    upstream,
                    endpoints: refs,
                } => {
                    // `Config` holds only positions of its own `endpoints`.
                    let route = |i: usize| Route {
                        endpoint: endpoints[i].clone(),
                        admission: endpoint_admission[i].clone(),
                        child: None,
                    };
                    let routes = match refs.rest.split_last() {
                        None => Routes::one(route(refs.first)),
                        Some((&last, middle)) => Routes {
                            before: std::iter::once(refs.first)
                                .chain(middle.iter().copied())
                                .map(route)
                                .collect(),
                            last: route(last),
                        },
                    };
                    (upstream.clone(), routes, model.tool_dialect)
                }
                ModelBackend::Local(launch) => {
                    let Some(running) = fleet.model(&model.name) else {
                        tracing::error!(model = %model.name, "local model has no running child; left out of the profile");
                        continue;
                    };
                    let endpoint = Endpoint::new(
                        &format!("local:{}", model.name),
                        &running.base_url,
                        Some(running.child.bearer().clone()),
                        LOCAL_LIMITS,
                    );
                    let own_queue = staged.local.get(&model.name).cloned();
                    let admission = match &launch.dominion {
                        Some(d) => staged.dominion(d).cloned(),
                        None => own_queue.clone(),
                    };
                    local.push(LocalModel {
                        name: model.name.clone(),
                        running: running.clone(),
                        own_queue,
                    });
                    let route = Route {
                        endpoint: Arc::new(endpoint),
                        admission,
                        child: Some(running.clone()),
                    };
                    (model.name.clone(), Routes::one(route), running.dialect)
                }
            };
            models.push(Model {
                name: model.name.as_str().into(),
                kind: model.kind,
                upstream_model,
                default_max_tokens: model.default_max_tokens,
                dialect,
                routes,
                config: model.clone(),
            });
        }
        local.sort_by(|a, b| a.name.cmp(&b.name));
        let by_name = models
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.clone(), i))
            .collect();
        let dominions = config
            .dominions
            .iter()
            .map(|d| Dominion {
                config: d.clone(),
                admission: staged.dominion(&d.id).cloned(),
            })
            .collect();
        let search = match (&config.web_search, search_client) {
            (Some(settings), Some(client)) => Some(Search {
                config: settings.clone(),
                client,
            }),
            _ => None,
        };
        Self {
            profile: profile.to_owned(),
            config,
            endpoints,
            models,
            by_name,
            dominions,
            local,
            search,
        }
    }

    /// A loaded model by its exact name (the one lookup a request makes).
    pub(crate) fn model(&self, name: &str) -> Option<&Model> {
        self.by_name.get(name).map(|&i| &self.models[i])
    }

    /// Every remote endpoint, in configuration order.
    pub(crate) fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// Every loaded model, in configuration order.
    pub(crate) fn models(&self) -> &[Model] {
        &self.models
    }

    /// Every dominion with its admission, in configuration order.
    pub(crate) fn dominions(&self) -> &[Dominion] {
        &self.dominions
    }

    /// The limited dominion `id`'s admission.
    fn dominion_admission(&self, id: &str) -> Option<&Admission> {
        self.dominions
            .iter()
            .find(|d| d.config.id == id)
            .and_then(|d| d.admission.as_ref())
    }

    /// The local models' children, by name.
    pub(crate) fn local(&self) -> &[LocalModel] {
        &self.local
    }

    /// Web search, when configured.
    pub(crate) fn search(&self) -> Option<&Search> {
        self.search.as_ref()
    }

    /// The queue state of every dominion (`None` for an unlimited one).
    pub(crate) fn dominion_snapshots(&self) -> impl Iterator<Item = (&Dominion, Option<Snapshot>)> {
        self.dominions
            .iter()
            .map(|d| (d, d.admission.as_ref().map(Admission::snapshot)))
    }
}

/// The live plan: swapped whole by a profile switch, read by every request (one `Arc`
/// clone under a read lock).
#[derive(Debug)]
pub(crate) struct Current {
    plan: RwLock<Arc<Plan>>,
}

impl Current {
    /// `plan`, live.
    pub(crate) fn new(plan: Plan) -> Self {
        Self {
            plan: RwLock::new(Arc::new(plan)),
        }
    }

    /// The live plan.
    pub(crate) fn load(&self) -> Arc<Plan> {
        self.plan
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes `plan` the live one; requests in flight keep the plan they started with.
    pub(crate) fn store(&self, plan: Arc<Plan>) {
        *self.plan.write().unwrap_or_else(PoisonError::into_inner) = plan;
    }
}
