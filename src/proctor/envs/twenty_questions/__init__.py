"""Twenty questions (ArCHer): a knowledge base of everyday objects, a question grammar with a
deterministic oracle, the env, and an information-gain expert (`infogain`)."""

from proctor.envs.twenty_questions.env import TwentyQuestionsEnv, split_objects
from proctor.envs.twenty_questions.expert import infogain_expert
from proctor.envs.twenty_questions.questions import canonical_questions, parse_question, question_grammar

__all__ = ["TwentyQuestionsEnv", "canonical_questions", "infogain_expert", "parse_question", "question_grammar",
           "split_objects"]
