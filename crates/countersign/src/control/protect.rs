//! [`Control::protect`]: a typed async function wrapped so that every call goes through the
//! pipeline, deserialized from exactly the canonical arguments that were hashed.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::approval::ApprovalId;
use crate::effect::ExecutorError;
use crate::error::ControlError;
use crate::policy::Template;

use super::{ActionRequest, Control, Executed};

impl Control {
    /// Wrap an async function or closure as a protected tool named `action`.
    ///
    /// The function receives the arguments deserialized from their canonical form, so what
    /// runs is exactly what was hashed and approved.
    pub fn protect<A, T, F, Fut>(&self, action: impl Into<String>, executor: F) -> Protected<A, F>
    where
        A: Serialize + DeserializeOwned,
        F: Fn(A) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        Protected {
            control: self.clone(),
            action: action.into(),
            executor,
            timeout: None,
            wait: None,
            effect: None,
            resource: None,
            arguments: PhantomData,
        }
    }
}

/// A protected tool: an async function wrapped by [`Control::protect`].
pub struct Protected<A, F> {
    control: Control,
    action: String,
    executor: F,
    timeout: Option<Duration>,
    wait: Option<Duration>,
    effect: Option<Template>,
    resource: Option<Template>,
    arguments: PhantomData<fn(A)>,
}

impl<A, T, F, Fut> Protected<A, F>
where
    A: Serialize + DeserializeOwned,
    F: Fn(A) -> Fut,
    Fut: Future<Output = Result<T, ExecutorError>>,
{
    /// Give each run at most `timeout` (past it: `ambiguous`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Wait up to `wait` for an out-of-band answer when approval is needed.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// An effect-key template used when the policy entry declares none.
    pub fn effect(mut self, template: Template) -> Self {
        self.effect = Some(template);
        self
    }

    /// A resource template used when the policy entry declares none.
    pub fn resource(mut self, template: Template) -> Self {
        self.resource = Some(template);
        self
    }

    /// The action name.
    pub fn action(&self) -> &str {
        &self.action
    }

    fn request(&self, arguments: &A, approval: Option<ApprovalId>) -> ActionRequest {
        let mut request = ActionRequest::new(self.action.clone(), arguments);
        request.timeout = self.timeout;
        request.wait = self.wait;
        request.effect = self.effect.clone();
        request.resource = self.resource.clone();
        request.approval = approval;
        request
    }

    async fn run(&self, request: ActionRequest) -> Result<Executed<T>, ControlError> {
        let executor = &self.executor;
        self.control
            .execute(request, |canonical: serde_json::Value| async move {
                let arguments: A = serde_json::from_value(canonical).map_err(|error| {
                    ExecutorError::not_executed(format!(
                        "the canonical arguments do not fit the tool's argument type: {error}"
                    ))
                })?;
                executor(arguments).await
            })
            .await
    }

    /// Call the tool.
    ///
    /// # Errors
    ///
    /// As [`Control::execute`].
    pub async fn call(&self, arguments: &A) -> Result<Executed<T>, ControlError> {
        self.run(self.request(arguments, None)).await
    }

    /// Call the tool presenting an approval.
    ///
    /// # Errors
    ///
    /// As [`Control::execute`].
    pub async fn call_with_approval(
        &self,
        arguments: &A,
        approval: ApprovalId,
    ) -> Result<Executed<T>, ControlError> {
        self.run(self.request(arguments, Some(approval))).await
    }
}
