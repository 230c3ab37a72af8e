//! The seed body of a teneral individual.
//!
//! This is the code the agent runs as, reads about itself, and may rewrite.
//! The kernel starts it (docs/contract.md in the project) with a handful of
//! environment variables, an event socket, and the individual's directory as
//! its working directory. From there it waits for something to wake it (its
//! owner, the clock, its inbox), asks the model what to do, runs the tools
//! the model calls, and journals everything through the kernel.
//!
//! One module per concern:
//!
//! | module | what it does |
//! |---|---|
//! | [`config`] | the environment the kernel gives |
//! | [`events`] | the socket to the kernel, the only way into the journal |
//! | [`journal`] | reading the journal back at start |
//! | [`context`] | the conversation, and what of it fits one request |
//! | [`prompt`] | the system prompt and the soul files |
//! | [`model`] | the two wire protocols, request and answer |
//! | [`stream`] | replies read as they are written, and a provider that will not stream |
//! | [`images`] | the owner's images, checked and shown to the model |
//! | [`http`] | a small HTTP/1.1 client for the model on loopback |
//! | [`tools`] | the tools the model can call |
//! | [`shell`] | the `bash` tool: a command in its own process group |
//! | [`inbox`] | envelopes from and to other agents |
//! | [`mutate`] | committing the workspace to ask for a new generation |
//! | [`sensors`] | inotify on the owner's directory and the inbox |
//! | [`clock`] | the heartbeat and the time of day |
//! | [`cancel`] | how an owner's interrupt reaches the work in progress |
//! | [`turn`] | one turn: stimulus, model, tools, reply |
//! | [`sys`] | the only `unsafe` code: signals, process groups and pipes |

pub mod cancel;
pub mod clock;
pub mod config;
pub mod context;
pub mod events;
pub mod http;
pub mod images;
pub mod inbox;
pub mod journal;
pub mod model;
pub mod mutate;
pub mod prompt;
pub mod sensors;
pub mod shell;
pub mod stream;
pub mod sys;
pub mod tools;
pub mod turn;
