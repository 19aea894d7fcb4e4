//! A toy framework with its own pause/resume primitive, and an adapter for it written from
//! docs/SPEC.md alone (as a new adapter author would), checked by the kit.
//!
//! `toyflow` runs a task on a thread. A task asks a human with `Flow::ask(question)`: on the first
//! run that records the question and the task must stop (`Step::Paused`); the flow checkpoints the
//! thread to a JSON file. `Flow::resume(thread, value)` loads the checkpoint and runs the task
//! again from the top; this time `ask` returns `value` (positional, as LangGraph's `interrupt()`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use countersign::approver::Credential;
use countersign::{
    ActionRequest, AnswerDecision, ApprovalAnswer, ApprovalId, ControlError, FrameworkInterrupt,
    InterruptError, PendingApproval,
};
use countersign_conformance::adapter_kit::{
    self, Adapter, Call, CaseStatus, HumanAnswer, Session, Setup, Shape, Shown,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The toy framework.
mod toyflow {
    use super::*;

    /// How a run ended.
    pub enum Step<T> {
        /// The task finished.
        Done(T),
        /// The task asked a human and stopped; the question is checkpointed. `output` is what
        /// the task returned on its way out.
        Paused { question: Value, output: T },
    }

    #[derive(Default, Serialize, Deserialize)]
    struct Checkpoint {
        resumes: Vec<Value>,
        question: Option<Value>,
    }

    #[derive(Default)]
    struct Running {
        resumes: Vec<Value>,
        cursor: usize,
        question: Option<Value>,
    }

    /// A flow whose checkpoints live in a folder.
    pub struct Flow {
        folder: PathBuf,
        running: Mutex<Running>,
    }

    impl Flow {
        pub fn new(folder: &Path) -> Flow {
            Flow {
                folder: folder.to_path_buf(),
                running: Mutex::default(),
            }
        }

        /// The framework's primitive: the resume value for this ask, or `None` (the question is
        /// recorded and the task must stop).
        pub fn ask(&self, question: Value) -> Option<Value> {
            let mut running = self.running.lock().expect("toyflow lock");
            if running.cursor < running.resumes.len() {
                running.cursor += 1;
                return Some(running.resumes[running.cursor - 1].clone());
            }
            running.question = Some(question);
            None
        }

        fn path(&self, thread: &str) -> PathBuf {
            self.folder.join(format!("{thread}.json"))
        }

        fn load(&self, thread: &str) -> Checkpoint {
            std::fs::read(self.path(thread))
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or_default()
        }

        /// Run `task` on `thread` from the top, with the checkpoint's resume values plus `value`.
        pub async fn run<T, F, Fut>(&self, thread: &str, value: Option<Value>, task: F) -> Step<T>
        where
            F: FnOnce() -> Fut,
            Fut: std::future::Future<Output = T>,
        {
            let mut checkpoint = self.load(thread);
            checkpoint.resumes.extend(value);
            *self.running.lock().expect("toyflow lock") = Running {
                resumes: checkpoint.resumes.clone(),
                ..Running::default()
            };
            let output = task().await;
            let question = self.running.lock().expect("toyflow lock").question.take();
            checkpoint.question = question.clone();
            let bytes = serde_json::to_vec(&checkpoint).expect("checkpoint serializes");
            std::fs::write(self.path(thread), bytes).expect("checkpoint written");
            match question {
                Some(question) => Step::Paused { question, output },
                None => Step::Done(output),
            }
        }
    }
}

use toyflow::{Flow, Step};

/// One thread per run and call, named from them, so a resume in another process finds it.
fn thread(call: &Call) -> String {
    format!("{}{}{}", call.run, call.action, call.arguments)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The resume payload: the human's answer, naming the request it answers (SPEC 2.2, 2.4).
#[derive(Serialize, Deserialize)]
struct Resume {
    request_id: String,
    decision: String,
    /// Who answered, for display. Checkpointed run state: never the approver the kernel is
    /// given (SPEC 2.2); that one is passed on the resuming call.
    approver: String,
    note: Option<String>,
    arguments: Value,
    /// The action hash the human was shown, echoed back.
    action_hash: Option<String>,
}

/// The adapter's interrupt: reaches `Flow::ask`.
struct ToyInterrupt {
    flow: Arc<Flow>,
    /// The resume value the current resuming call delivered, with the approver the operator
    /// passed on that call. Taken once: a resume value replayed from the checkpoint carries no
    /// identity, so it answers nothing and the flow asks again.
    resuming: Mutex<Option<(Value, Credential)>>,
}

impl ToyInterrupt {
    /// The approver the operator passed with `value` on this resuming call, if `value` is what
    /// it delivered.
    fn operator_approver(&self, value: &Value) -> Option<Credential> {
        let mut resuming = self.resuming.lock().expect("toy adapter lock");
        match resuming.take() {
            Some((delivered, approver)) if &delivered == value => Some(approver),
            other => {
                *resuming = other;
                None
            }
        }
    }
}

#[async_trait::async_trait]
impl FrameworkInterrupt for ToyInterrupt {
    fn framework(&self) -> &str {
        "toyflow"
    }

    fn carries_approved_arguments(&self) -> bool {
        true
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let question = json!({
            "request_id": pending.request_id,
            "action": pending.action,
            "arguments": pending.arguments,
            "expires_at": pending.expires_at,
            "action_hash": pending.action_hash,
        });
        loop {
            let Some(value) = self.flow.ask(question.clone()) else {
                return Err(InterruptError::Suspended);
            };
            let resume: Resume = serde_json::from_value(value.clone())
                .map_err(|error| InterruptError::Failed(format!("unreadable resume: {error}")))?;
            // SPEC 2.2: an answer held for another request is not an answer to this one; ask
            // again (the next `ask` pauses the flow).
            if resume.request_id != pending.request_id.as_str() {
                continue;
            }
            // The approver is the one the operator passed with this value on this resuming
            // call, never the payload's name. A value replayed from the checkpoint (an earlier
            // answer, already handed over: a quorum's first yes) has none: ask again.
            let Some(approver) = self.operator_approver(&value) else {
                continue;
            };
            // The closed decision set (case B38): anything else is no answer at all.
            let decision = AnswerDecision::parse(&resume.decision).map_err(|invalid| {
                InterruptError::Failed(format!(
                    "the resume's decision {} is not approve or deny",
                    invalid.given
                ))
            })?;
            return Ok(ApprovalAnswer {
                decision,
                approver,
                shown_hash: resume.action_hash.map(countersign::ActionHash::from_stored),
                note: resume.note,
                arguments: Some(resume.arguments),
            });
        }
    }
}

struct ToyAdapter;

impl ToyAdapter {
    /// One run of the flow: the tool body is `Control::execute` (SPEC 2.3).
    async fn run_flow(
        &self,
        session: &Session<ToyInterrupt>,
        call: &Call,
        value: Option<Value>,
    ) -> Step<Result<Value, ControlError>> {
        let flow = &session.interrupt().flow;
        flow.run(&thread(call), value, || async {
            let tool = session.tool().clone();
            session
                .control()
                .execute(
                    // The flow's run id is the kit's run label: the run's requests are scoped
                    // to it (SPEC 2.3), so another run's approval never authorizes this call.
                    ActionRequest::new(call.action.clone(), &call.arguments)
                        .with_run(call.run.clone()),
                    move |arguments| async move { tool.call(arguments).await },
                )
                .await
                .map(|executed| executed.value)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Adapter for ToyAdapter {
    type Interrupt = ToyInterrupt;

    fn framework(&self) -> &str {
        "toyflow"
    }

    fn shape(&self) -> Shape {
        Shape::ResumedInPlace
    }

    fn interrupt(&self, setup: &Setup) -> Arc<ToyInterrupt> {
        Arc::new(ToyInterrupt {
            flow: Arc::new(Flow::new(setup.scratch_dir())),
            resuming: Mutex::default(),
        })
    }

    async fn invoke(
        &self,
        session: &Session<ToyInterrupt>,
        call: &Call,
    ) -> Result<Value, ControlError> {
        let mut value = None;
        let mut answered = false;
        loop {
            match self.run_flow(session, call, value.take()).await {
                Step::Done(result) => return result,
                // Asked once already: the kernel's refusal stands (SPEC 2.4: one answer per pause).
                Step::Paused { output, .. } if answered => return output,
                Step::Paused { question, output } => {
                    let shown = Shown {
                        request_id: question["request_id"]
                            .as_str()
                            .and_then(|id| ApprovalId::parse(id).ok()),
                        action: question["action"].as_str().unwrap_or_default().to_owned(),
                        arguments: question["arguments"].clone(),
                        expires_at: None,
                        action_hash: question["action_hash"]
                            .as_str()
                            .map(|hash| countersign::ActionHash::from_stored(hash.to_owned())),
                    };
                    // Nobody answered: the flow stays paused; return the kernel's refusal.
                    let Some(answer) = session.reviewer().review(&shown) else {
                        return output;
                    };
                    let payload = resume_payload(&answer);
                    // The operator passes who answered on the resuming call, beside the value.
                    *session
                        .interrupt()
                        .resuming
                        .lock()
                        .expect("toy adapter lock") =
                        Some((payload.clone(), answer.operator_approver.clone()));
                    value = Some(payload);
                    answered = true;
                }
            }
        }
    }

    async fn resume(
        &self,
        session: &Session<ToyInterrupt>,
        call: &Call,
    ) -> Result<Value, ControlError> {
        // Resume with no new value: a human who answered out of band is found by the kernel
        // (SPEC 2.4), and a replay from the checkpoint re-enters the same code.
        match self.run_flow(session, call, None).await {
            Step::Done(result) | Step::Paused { output: result, .. } => result,
        }
    }
}

fn resume_payload(answer: &HumanAnswer) -> Value {
    serde_json::to_value(Resume {
        request_id: answer
            .request_id
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default(),
        decision: match answer.decision {
            AnswerDecision::Approve => "approve".to_owned(),
            AnswerDecision::Deny => "reject".to_owned(),
        },
        approver: answer.payload_approver.clone(),
        note: answer.note.clone(),
        arguments: answer.arguments.clone(),
        action_hash: answer
            .shown_hash
            .as_ref()
            .map(|hash| hash.as_str().to_owned()),
    })
    .expect("the resume payload serializes")
}

#[tokio::test]
async fn toy_framework_adapter_written_from_the_spec_passes_the_kit() {
    let report = adapter_kit::run(&ToyAdapter, &crate::options())
        .await
        .expect("the kit runs");
    println!("{}", report.to_text());
    assert!(report.is_ok(), "{}", report.to_text());
    assert!(
        report
            .cases()
            .iter()
            .all(|case| case.status == CaseStatus::Pass)
    );
}
