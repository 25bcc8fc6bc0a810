"""slime.observability.logging_utils: tracking (wandb, tensorboard) in slime; nothing here."""


def configure_logger(*args, **kwargs) -> None:
    pass


def init_tracking(*args, **kwargs) -> None:
    pass


def finish_tracking(*args, **kwargs) -> None:
    pass
